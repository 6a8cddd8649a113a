import type { Context, ServiceSchema } from "moleculer";
import type { CallMeta } from "../../shared/api/context";
import { nowIso } from "../../shared/ids";
import type { PlatformSettings } from "../../shared/runtime/platform";
import type { Tenant } from "../../shared/storage/types";
import { DISABLE_AFTER_FAILURES, targetOf, type Target } from "./webhooks.logic";
import { outcomeParams, subscribersParams, targetParams, type OutcomeParams } from "./webhooks.params";
import type { WebhooksMethods, WebhooksVars } from "./webhooks.types";

type Ctx<P> = Context<P, CallMeta>;

/** What the webhook dispatcher asks of the webhooks it sends to: their targets, and each delivery's outcome for the failure streak. */
const DispatcherCallsSchema: Partial<ServiceSchema<PlatformSettings, WebhooksMethods, WebhooksVars>> = {
  actions: {
    /** Internal, for the dispatcher: the enabled webhooks of one environment. */
    subscribers: {
      visibility: "public",
      params: subscribersParams,
      async handler(ctx: Context<Required<Tenant>>): Promise<Target[]> {
        const docs = await this.webhooks.find(ctx.params, { status: "enabled" });
        const now = Date.now();
        return docs.map((doc) => targetOf(doc, now));
      },
    },

    /** Internal, for the dispatcher: one webhook as a target, or null once deleted. */
    target: {
      visibility: "public",
      params: targetParams,
      async handler(ctx: Context<{ org_id: string; id: string }>): Promise<Target | null> {
        const doc = await this.webhooks.get({ org_id: ctx.params.org_id }, ctx.params.id);
        return doc ? targetOf(doc) : null;
      },
    },

    /**
     * Internal, for the dispatcher: a delivery settled. A success clears the failure streak; the
     * tenth failed delivery in a row disables the webhook and records `webhook.disabled`. A delivery
     * counts once it exhausted its attempts or, when started by hand, with each failed attempt.
     */
    recordOutcome: {
      visibility: "public",
      params: outcomeParams,
      async handler(ctx: Ctx<OutcomeParams>): Promise<void> {
        const tenant = { org_id: ctx.params.org_id };
        if (ctx.params.ok) {
          await this.webhooks.update(
            tenant,
            { id: ctx.params.id, consecutive_failures: { $gt: 0 } },
            { $set: { consecutive_failures: 0 } },
          );
          return;
        }
        const counted = await this.webhooks.update(tenant, { id: ctx.params.id }, { $inc: { consecutive_failures: 1 } });
        if (!counted || counted.consecutive_failures < DISABLE_AFTER_FAILURES) return;
        const reason = `${counted.consecutive_failures} deliveries in a row failed (each attempt of one started by hand counts)`;
        // Disabled and its event stored together, or neither (another node disabled it first).
        const disabled = await this.outbox.recordWith(
          [
            {
              op: "update",
              collection: this.webhooks,
              scope: tenant,
              filter: { id: counted.id, status: "enabled" },
              update: { $set: { status: "disabled", disabled_reason: reason, updated_at: nowIso() } },
            },
          ],
          {
            org_id: counted.org_id,
            environment: counted.environment,
            type: "webhook.disabled",
            data: { webhook_id: counted.id, reason },
            source: "webhooks",
          },
        );
        if (disabled)
          this.logger.warn(
            {
              webhook_id: counted.id,
              org_id: counted.org_id,
              failures: counted.consecutive_failures,
              request_id: ctx.meta.request_id ?? null,
            },
            "webhook disabled",
          );
      },
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const DispatcherCallsMixin = DispatcherCallsSchema as Partial<ServiceSchema>;
