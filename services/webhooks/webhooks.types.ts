import { DELIVERIES, RECOVERIES } from "../../shared/records/deliveries";
import { EVENTS } from "../../shared/records/events";
import { WEBHOOK_OUTCOMES } from "../../shared/records/outcomes";
import { quotaCounters } from "../../shared/records/quotas";
import { declareStore, type StoreVars } from "../../shared/runtime/store.mixin";
import { collectionSpec, type Tenant } from "../../shared/storage/types";
import type { WebhookDoc, WebhookView } from "./webhooks.logic";

/**
 * What the webhooks schema and its mixins share: the store declaration and the methods the schema
 * gives. The API is split by concern: the webhooks themselves (webhooks.service.ts), their delivery
 * log (delivery-log.mixin.ts), and what the dispatcher asks for (dispatcher-calls.mixin.ts).
 */

/** What `webhook-dispatcher.redeliver` takes (the dispatcher owns the delivery log). */
export interface RedeliverArgs {
  org_id: string;
  environment: "live" | "test";
  webhook_id: string;
  id: string;
  status: "succeeded" | "failed";
  series_start: number;
}

/** Webhooks and the outbox of their events; the delivery log is the dispatcher's, read here for the API. */
export const STORE = declareStore({
  owns: {
    webhooks: collectionSpec<WebhookDoc>("webhooks", [
      { fields: { org_id: 1, environment: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, status: 1, id: -1 } },
    ]),
    // The webhooks of each environment, counted with each creation and deletion (quotas.ts).
    quota: quotaCounters("webhook_quota"),
  },
  // The event log for a delivery's body and an event's deliveries; recovery jobs for their progress.
  reads: { deliveries: DELIVERIES, outcomes: WEBHOOK_OUTCOMES, events: EVENTS, recoveries: RECOVERIES },
  outbox: true,
});

export type WebhooksVars = StoreVars<typeof STORE>;
export interface WebhooksMethods {
  ownWebhook(tenant: Tenant, id: string): Promise<WebhookDoc>;
  /** The webhook, refused (409) when disabled: what sends to it must wait until it is enabled. */
  enabledWebhook(tenant: Tenant, id: string, doing: string): Promise<WebhookDoc>;
  checkUrl(url: string, tenant: Required<Tenant>): Promise<string>;
  /** The views with their health (shared/api/wire.ts WebhookHealth): two bounded reads of the dispatcher's counters. */
  withHealth(tenant: Required<Tenant>, views: WebhookView[]): Promise<WebhookView[]>;
}
