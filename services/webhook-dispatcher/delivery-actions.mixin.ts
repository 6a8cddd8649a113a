import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { deliveryView, type DeliveryDoc, type DeliveryView } from "../../shared/records/deliveries";
import { ApiError } from "../../shared/errors";
import { newId } from "../../shared/ids";
import { webhookRowsOf } from "../../shared/records/outcomes";
import { freshDelivery } from "./dispatcher.logic";
import {
  redeliverParams,
  retryNowParams,
  sendTestParams,
  type RedeliverParams,
  type RetryNowParams,
  type SendTestParams,
} from "./dispatcher.params";
import type { DispatcherMethods, DispatcherVars } from "./dispatcher.types";

/**
 * The delivery log's actions on one delivery the webhooks API asks for (the dispatcher owns the
 * log): send a pending delivery's next attempt now, start a settled one's new series, send a test
 * event to one webhook. Recovery jobs are in recovery.mixin.ts.
 */

/** What the dispatcher's schema gives these actions (its store declaration, tally and `claim`). */
type This = Pick<DispatcherVars, "deliveries" | "outcomes" | "tally" | "failures" | "throttle"> &
  Pick<DispatcherMethods, "claim" | "later" | "manualSlot" | "claimAt">;

/**
 * Attempts of sends started by hand through these actions (retry now, redeliver, test), their
 * retries included, start at most this many per second per webhook, across all dispatcher nodes: a
 * burst of calls queues at this pace, and since each failed attempt counts toward the auto-disable,
 * a failing receiver gets a bounded number of them (docs/webhooks-amplification.md).
 */
export const MANUAL_PER_SECOND = 2;
/** The throttle document of a webhook's hand-started sends: its id is the webhook's plus this. */
export const MANUAL_THROTTLE_SUFFIX = ".manual";

const DeliveryActionsSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, This>> = {
  actions: {
    /**
     * Internal, for the webhooks API (which checked the webhook): a pending delivery waiting for its
     * next attempt gets it now (at the webhook's next slot for sends started by hand). One whose attempt is claimed (in flight, or queued at its throttle's
     * turn) is answered as it is: that attempt is the retry, and nothing is sent twice.
     */
    retryNow: {
      visibility: "public",
      params: retryNowParams,
      async handler(ctx: Context<RetryNowParams>): Promise<DeliveryView> {
        const { org_id, environment, webhook_id, id } = ctx.params;
        const tenant = { org_id, environment };
        const at = await this.manualSlot(org_id, webhook_id);
        const updated = await this.deliveries.update(
          tenant,
          { id, webhook_id, status: "pending", lease: null },
          { $set: { due_at: at, next_attempt_at: new Date(at).toISOString(), manual: true } },
        );
        if (!updated) {
          const current = await this.deliveries.findOne(tenant, { id, webhook_id });
          if (current?.status === "pending") return deliveryView(current);
          throw new ApiError("invalid_state", "The delivery has settled; POST …/redeliver starts a new series of attempts", {
            param: "delivery_id",
          });
        }
        this.claimAt(id, at);
        return deliveryView(updated);
      },
    },

    /**
     * Internal, for POST /webhooks/{id}/test: a delivery of an example event to that webhook alone,
     * marked `test` (in the body and on the delivery). Its event is not stored in the event log (no
     * other webhook or workflow sees it); the body is kept on the delivery instead.
     */
    sendTest: {
      visibility: "public",
      params: sendTestParams,
      async handler(ctx: Context<SendTestParams>): Promise<DeliveryView> {
        const { org_id, environment, webhook_id, event_type, data } = ctx.params;
        const due = await this.manualSlot(org_id, webhook_id);
        const at = new Date().toISOString();
        const eventId = newId("evt");
        const doc: DeliveryDoc = {
          ...freshDelivery({ org_id, environment }, { id: eventId, type: event_type }, webhook_id, at),
          test: true,
          payload: { id: eventId, type: event_type, created_at: at, data, test: true },
          next_attempt_at: new Date(due).toISOString(),
          due_at: due,
          manual: true,
        };
        await this.deliveries.insert(doc);
        this.tally.add(webhookRowsOf(doc), { created: 1 });
        this.claimAt(doc.id, due);
        return deliveryView(doc);
      },
    },

    /**
     * Internal, for the webhooks service (whose API checked the webhook and the delivery): a settled
     * delivery starts a new series of attempts now, taken out of its settled count, and this node
     * claims it at once. Answers the delivery as updated; 409 if it changed meanwhile.
     */
    redeliver: {
      visibility: "public",
      params: redeliverParams,
      async handler(ctx: Context<RedeliverParams>): Promise<DeliveryDoc> {
        const { org_id, environment, webhook_id, id, status, series_start } = ctx.params;
        const due = await this.manualSlot(org_id, webhook_id);
        const at = new Date().toISOString();
        // From the settled status the caller read, so the right settled count is taken back below.
        const updated = await this.deliveries.update(
          { org_id, environment },
          { id, webhook_id, status },
          {
            $set: {
              status: "pending",
              series_start,
              due_at: due,
              next_attempt_at: new Date(due).toISOString(),
              updated_at: at,
              manual: true,
            },
            $unset: { lease: true },
          },
        );
        if (!updated) {
          throw new ApiError("invalid_state", "The delivery changed meanwhile (it is being redelivered); read it again", {
            param: "delivery_id",
          });
        }
        // The redelivery stands if this write fails; the count is then one off, and logged.
        await Promise.all(webhookRowsOf(updated).map((row) => this.outcomes.increment(row, { [status]: -1 }))).catch((err: unknown) =>
          this.logger.warn(`delivery ${id}: redelivered, but its settled count in analytics could not be taken back`, err),
        );
        this.claimAt(id, due);
        return updated;
      },
    },
  },

  methods: {
    manualSlot(orgId: string, webhookId: string) {
      return this.throttle.reserve(orgId, `${webhookId}${MANUAL_THROTTLE_SUFFIX}`, MANUAL_PER_SECOND);
    },

    claimAt(id: string, at: number) {
      const claim = () =>
        void this.claim(id).catch((err: unknown) =>
          this.failures.failed("claiming deliveries", err, "the poll claims them once the store answers"),
        );
      const wait = at - Date.now();
      if (wait <= 0) claim();
      else this.later(claim, wait);
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const DeliveryActionsMixin = DeliveryActionsSchema as Partial<ServiceSchema>;
