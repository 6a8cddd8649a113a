import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { deliverySummary, deliveryView, recoveryView, type DeliveryDoc, type DeliveryView } from "../../shared/records/deliveries";
import { payloadOf } from "../../shared/records/events";
import { firstIdAt } from "../../shared/records/retention";
import { ApiError, invalidParam, notFound } from "../../shared/errors";
import { newestFirst, skipOf, type ListResult } from "../../shared/api/pagination";
import type { PlatformSettings } from "../../shared/runtime/platform";
import type { Filter } from "../../shared/storage/types";
import type { DeliveryDetail, Recovery } from "../../shared/api/wire";
import { checkTestData, testEventOf, timeOf } from "./webhooks.logic";
import {
  deliveriesParams,
  deliveryParams,
  eventDeliveriesParams,
  recoverParams,
  recoveryParams,
  testParams,
  type DeliveriesParams,
  type DeliveryParams,
  type EventDeliveriesParams,
  type RecoverParams,
  type RecoveryParams,
  type TestParams,
} from "./webhooks.params";
import type { RedeliverArgs, WebhooksMethods, WebhooksVars } from "./webhooks.types";

type Ctx<P> = Context<P, CallMeta>;

/**
 * A webhook's delivery log through the API: read it, and act on it (retry, redeliver, test events,
 * recovery jobs). The log is the dispatcher's: it is read here, and every action that sends is the
 * dispatcher's, asked over the broker once the webhook and the delivery are checked here.
 */
const DeliveryLogSchema: Partial<ServiceSchema<PlatformSettings, WebhooksMethods, WebhooksVars>> = {
  actions: {
    /**
     * GET /webhooks/{id}/deliveries — webhooks:read; the delivery log, newest first, each attempt's
     * summary. Filters: `status`, `event_type` (each alone or both), `created_after` (≥) and
     * `created_before` (<) as a range of ids (they sort by the event's time), `event_id` (one
     * delivery at most: a lookup by its unique key).
     */
    deliveries: {
      params: deliveriesParams,
      async handler(ctx: Ctx<DeliveriesParams>): Promise<ListResult<DeliveryView>> {
        const tenant = tenantOf(ctx);
        const p = ctx.params;
        const range = {
          ...(p.created_after !== undefined && { $gte: firstIdAt("del", timeOf(p.created_after, "created_after")) }),
          ...(p.created_before !== undefined && { $lt: firstIdAt("del", timeOf(p.created_before, "created_before")) }),
        };
        const webhook = await this.ownWebhook(tenant, p.id);
        const filter: Filter = {
          webhook_id: webhook.id,
          ...(p.status && { status: p.status }),
          ...(p.event_type && { event_type: p.event_type }),
          ...(Object.keys(range).length > 0 && { id: range }),
        };
        if (p.event_id === undefined) return newestFirst(this.deliveries, tenant, filter, p, deliverySummary);
        // One event has one delivery per webhook: read by that key, the other filters applied to it.
        const one = await this.deliveries.findOne(tenant, { webhook_id: webhook.id, event_id: p.event_id });
        const matches =
          one !== null &&
          (!p.status || one.status === p.status) &&
          (!p.event_type || one.event_type === p.event_type) &&
          (range.$gte === undefined || one.id >= range.$gte) &&
          (range.$lt === undefined || one.id < range.$lt);
        const items = one && matches && skipOf(p) === 0 ? [deliverySummary(one)] : [];
        const paged = p.limit !== undefined || p.starting_after !== undefined || p.ending_before !== undefined;
        const total = matches ? 1 : 0;
        return paged
          ? { items: p.starting_after || p.ending_before ? [] : items, total, limit: p.limit ?? p.per_page, has_more: false }
          : { items, total, page: p.page, per_page: p.per_page };
      },
    },

    /** GET /events/{id}/deliveries — webhooks:read (it shows the delivery log); an event's deliveries, newest first. */
    eventDeliveries: {
      params: eventDeliveriesParams,
      async handler(ctx: Ctx<EventDeliveriesParams>): Promise<ListResult<DeliveryView>> {
        const tenant = tenantOf(ctx);
        const event = await this.events.findOne(tenant, { id: ctx.params.id });
        if (!event) throw notFound("event", ctx.params.id);
        return newestFirst(this.deliveries, tenant, { event_id: event.id }, ctx.params, deliverySummary);
      },
    },

    /**
     * GET /webhooks/{id}/deliveries/{delivery_id} — webhooks:read; every attempt with the request
     * it sent and the answer it got, and the body sent (`payload`: the event's, read from the event log).
     */
    delivery: {
      params: deliveryParams,
      async handler(ctx: Ctx<DeliveryParams>): Promise<DeliveryDetail> {
        const tenant = tenantOf(ctx);
        const delivery = await this.deliveries.findOne(tenant, { id: ctx.params.delivery_id, webhook_id: ctx.params.id });
        if (!delivery) throw notFound("delivery", ctx.params.delivery_id);
        let payload = delivery.payload ?? null;
        if (!payload) {
          const event = await this.events.findOne(tenant, { id: delivery.event_id });
          payload = event ? (payloadOf(event) as unknown as Record<string, unknown>) : null;
        }
        return { ...deliveryView(delivery), payload };
      },
    },

    /**
     * POST /webhooks/{id}/deliveries/{delivery_id}/retry — webhooks:write. A pending delivery's next
     * attempt, now (its series goes on; no new series). Idempotent: one whose attempt is under way
     * is answered as it is. A settled one is a conflict: redeliver starts a new series.
     */
    retry: {
      params: deliveryParams,
      async handler(ctx: Ctx<DeliveryParams>): Promise<DeliveryView> {
        const tenant = tenantOf(ctx);
        const webhook = await this.enabledWebhook(tenant, ctx.params.id, "retrying");
        const delivery = await this.deliveries.findOne(tenant, { id: ctx.params.delivery_id, webhook_id: webhook.id });
        if (!delivery) throw notFound("delivery", ctx.params.delivery_id);
        if (delivery.status !== "pending") {
          throw new ApiError("invalid_state", "The delivery has settled; POST …/redeliver starts a new series of attempts", {
            param: "delivery_id",
          });
        }
        return ctx.call<DeliveryView, object>("webhook-dispatcher.retryNow", {
          org_id: delivery.org_id,
          environment: delivery.environment,
          webhook_id: webhook.id,
          id: delivery.id,
        });
      },
    },

    /**
     * POST /webhooks/{id}/test — webhooks:write; a signed example event of a subscribed type
     * (`event_type`, by default the first), sent to this webhook alone and marked `test: true` in
     * its body and on the delivery. Its data: `data` as given, else the system type's example, or
     * the latest stored event of that type's data (or {}).
     */
    test: {
      params: testParams,
      async handler(ctx: Ctx<TestParams>): Promise<DeliveryView> {
        const tenant = tenantOf(ctx);
        const webhook = await this.enabledWebhook(tenant, ctx.params.id, "sending a test event");
        const { type, example } = testEventOf(webhook.events, ctx.params.event_type);
        let data = ctx.params.data === undefined ? example : checkTestData(ctx.params.data);
        if (!data) {
          const latest = await this.events.findOne(tenant, { type }, { sort: { id: -1 } });
          data = latest?.data ?? {};
        }
        return ctx.call<DeliveryView, object>("webhook-dispatcher.sendTest", {
          org_id: webhook.org_id,
          environment: webhook.environment,
          webhook_id: webhook.id,
          event_type: type,
          data,
        });
      },
    },

    /**
     * POST /webhooks/{id}/recover — webhooks:write; 202 with a job that redelivers, in the
     * background, every delivery of this webhook that failed and was created in [since, until).
     * One job per webhook at a time (409 otherwise); GET …/recover/{job_id} shows its progress.
     */
    recover: {
      params: recoverParams,
      async handler(ctx: Ctx<RecoverParams>): Promise<Recovery> {
        const tenant = tenantOf(ctx);
        const since = timeOf(ctx.params.since, "since");
        const until = ctx.params.until === undefined ? undefined : timeOf(ctx.params.until, "until");
        if (until !== undefined && until <= since) throw invalidParam("until", "until must be after since");
        const webhook = await this.enabledWebhook(tenant, ctx.params.id, "recovering deliveries");
        return ctx.call<Recovery, object>("webhook-dispatcher.recover", {
          org_id: webhook.org_id,
          environment: webhook.environment,
          webhook_id: webhook.id,
          since,
          ...(until !== undefined && { until }),
        });
      },
    },

    /** GET /webhooks/{id}/recover/{job_id} — webhooks:read; a recovery's progress. */
    recovery: {
      params: recoveryParams,
      async handler(ctx: Ctx<RecoveryParams>): Promise<Recovery> {
        const job = await this.recoveries.findOne(tenantOf(ctx), { id: ctx.params.job_id, webhook_id: ctx.params.id });
        if (!job) throw notFound("recovery", ctx.params.job_id);
        return recoveryView(job);
      },
    },

    /**
     * POST /webhooks/{id}/deliveries/{delivery_id}/redeliver — webhooks:write. A settled delivery
     * starts a new series of attempts under the same id; one still pending is a conflict.
     */
    redeliver: {
      params: deliveryParams,
      async handler(ctx: Ctx<DeliveryParams>): Promise<DeliveryView> {
        const tenant = tenantOf(ctx);
        const webhook = await this.ownWebhook(tenant, ctx.params.id);
        const delivery = await this.deliveries.findOne(tenant, { id: ctx.params.delivery_id, webhook_id: webhook.id });
        if (!delivery) throw notFound("delivery", ctx.params.delivery_id);
        await this.enabledWebhook(tenant, webhook.id, "redelivering");
        if (delivery.status === "pending") {
          throw new ApiError("invalid_state", "The delivery is still pending: it has attempts left (POST …/retry sends the next one now)", {
            param: "delivery_id",
          });
        }
        // The delivery log is the dispatcher's: it starts the new series and sends it.
        const updated = await ctx.call<DeliveryDoc, RedeliverArgs>("webhook-dispatcher.redeliver", {
          org_id: delivery.org_id,
          environment: delivery.environment,
          webhook_id: webhook.id,
          id: delivery.id,
          status: delivery.status,
          series_start: delivery.attempts.length,
        });
        return deliveryView(updated);
      },
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const DeliveryLogMixin = DeliveryLogSchema as Partial<ServiceSchema>;
