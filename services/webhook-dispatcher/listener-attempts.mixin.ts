import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { deliveryView, type Attempt, type DeliveryDoc, type DeliveryView } from "../../shared/records/deliveries";
import { isDuplicate, notFound } from "../../shared/errors";
import type { EventDoc } from "../../shared/records/events";
import { newestFirst, pageParams, type ListResult, type PageParams } from "../../shared/api/pagination";
import type { Collection, ReadView } from "../../shared/storage/types";

/**
 * The delivery log's part for listener sessions (the CLI's `listen --forward-to`): the CLI reports
 * each local answer, stored as a delivery of the session (its `webhook_id` is the session's `ls_…`
 * id) with one attempt. The dispatcher owns `webhook_deliveries`, so the gateway's report route
 * calls these actions. Kept apart from the dispatcher's own sending.
 */
export const RESPONSE_EXCERPT_MAX = 1024;

const sessionId = {
  type: "string",
  pattern: /^ls_[0-9a-z]{26}$/,
  messages: { stringPattern: "not a listener session id (ls_ and 26 lower-case letters or digits)" },
} as const;

export const listenerAttemptParams = {
  $$strict: true,
  id: sessionId,
  delivery_id: { type: "string", pattern: /^del_[0-9a-z]{26}$/ },
  event_id: { type: "string", min: 1, max: 100 },
  status_code: { type: "number", integer: true, min: 100, max: 599, nullable: true },
  duration_ms: { type: "number", min: 0, max: 3_600_000 },
  error: { type: "string", max: 500, nullable: true, optional: true },
  response_excerpt: { type: "string", max: RESPONSE_EXCERPT_MAX, optional: true },
} as const;
interface ListenerAttemptParams {
  id: string;
  delivery_id: string;
  event_id: string;
  status_code: number | null;
  duration_ms: number;
  error?: string | null;
  response_excerpt?: string;
}

export const listenerDeliveriesParams = { $$strict: true, id: sessionId, ...pageParams } as const;

/** A listener's attempt also keeps the start of the local answer's body. */
type ListenerAttempt = Attempt & { response_excerpt?: string };

/** The dispatcher's store declaration gives these: its delivery log, and the event log to read. */
interface This {
  deliveries: Collection<DeliveryDoc>;
  events: ReadView<EventDoc>;
}

const ListenerAttemptsMixinSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, This>> = {
  actions: {
    /** POST /listen/{id}/attempts — webhooks:write; the answer the CLI got from the local URL. */
    listenerAttempt: {
      params: listenerAttemptParams,
      async handler(ctx: Context<ListenerAttemptParams, CallMeta>): Promise<DeliveryView> {
        const tenant = tenantOf(ctx);
        const p = ctx.params;
        // Only the tenant's own events: a report cannot name another's.
        const event = await this.events.findOne(tenant, { id: p.event_id });
        if (!event) throw notFound("event", p.event_id);
        const at = new Date().toISOString();
        const ok = p.status_code !== null && p.status_code >= 200 && p.status_code < 300;
        const attempt: ListenerAttempt = {
          number: 1,
          at,
          status_code: p.status_code,
          duration_ms: Math.round(p.duration_ms),
          error: p.error ?? (ok ? null : `HTTP ${p.status_code}`),
          ...(p.response_excerpt !== undefined && { response_excerpt: p.response_excerpt }),
        };
        const doc: DeliveryDoc = {
          id: p.delivery_id,
          ...tenant,
          webhook_id: p.id,
          event_id: event.id,
          event_type: event.type,
          status: ok ? "succeeded" : "failed",
          attempts: [attempt],
          series_start: 0,
          next_attempt_at: null,
          created_at: at,
          updated_at: at,
        };
        try {
          await this.deliveries.insert(doc);
          return deliveryView(doc);
        } catch (err) {
          // A report sent again (the CLI retried): the first one stands.
          if (!isDuplicate(err)) throw err;
          const first = await this.deliveries.findOne(tenant, { webhook_id: p.id, event_id: event.id });
          if (!first) throw err;
          return deliveryView(first);
        }
      },
    },

    /** GET /listen/{id}/deliveries — webhooks:read; a listener session's deliveries, newest first. */
    listenerDeliveries: {
      params: listenerDeliveriesParams,
      handler(ctx: Context<PageParams & { id: string }, CallMeta>): Promise<ListResult<DeliveryView>> {
        return newestFirst(this.deliveries, tenantOf(ctx), { webhook_id: ctx.params.id }, ctx.params, deliveryView);
      },
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const ListenerAttemptsMixin = ListenerAttemptsMixinSchema as Partial<ServiceSchema>;
