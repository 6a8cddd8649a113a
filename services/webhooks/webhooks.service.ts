import type { Context, ServiceSchema } from "moleculer";
import { actorOf, tenantOf, type CallMeta } from "../../shared/api/context";
import {
  DELIVERIES,
  deliverySummary,
  deliveryView,
  RECOVERIES,
  recoveryView,
  type DeliveryDoc,
  type DeliveryView,
} from "../../shared/records/deliveries";
import { EVENTS, payloadOf } from "../../shared/records/events";
import { firstIdAt } from "../../shared/records/retention";
import { ApiError, invalidParam, notFound } from "../../shared/errors";
import { checkCountQuota, QUOTAS } from "../../shared/records/quotas";
import { newId, nowIso } from "../../shared/ids";
import { checkTargetUrl } from "../../shared/net/net-guard";
import { healthOf, last24hFrom, WEBHOOK_OUTCOMES } from "../../shared/records/outcomes";
import { newestFirst, skipOf, type ListResult } from "../../shared/api/pagination";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { collectionSpec, type Filter, type Tenant } from "../../shared/storage/types";
import type { DeliveryDetail, Recovery, WebhookWithSecret } from "../../shared/api/wire";
import {
  checkSubscription,
  DISABLE_AFTER_FAILURES,
  generateSecret,
  ROTATION_OVERLAP_MS,
  targetOf,
  testEventOf,
  timeOf,
  webhookView,
  type Target,
  type WebhookDoc,
  type WebhookView,
} from "./webhooks.logic";
import {
  createParams,
  deliveriesParams,
  deliveryParams,
  eventDeliveriesParams,
  idParams,
  listParams,
  outcomeParams,
  recoverParams,
  recoveryParams,
  subscribersParams,
  targetParams,
  testParams,
  updateParams,
  type CreateParams,
  type DeliveriesParams,
  type DeliveryParams,
  type EventDeliveriesParams,
  type IdParams,
  type ListParams,
  type OutcomeParams,
  type RecoverParams,
  type RecoveryParams,
  type TestParams,
  type UpdateParams,
} from "./webhooks.params";

/** What `webhook-dispatcher.redeliver` takes (the dispatcher owns the delivery log). */
interface RedeliverArgs {
  org_id: string;
  environment: "live" | "test";
  id: string;
  status: "succeeded" | "failed";
  series_start: number;
}

/** Webhooks and the outbox of their events; the delivery log is the dispatcher's, read here for the API. */
const STORE = declareStore({
  owns: {
    webhooks: collectionSpec<WebhookDoc>("webhooks", [
      { fields: { org_id: 1, environment: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, status: 1, id: -1 } },
    ]),
  },
  // The event log for a delivery's body and an event's deliveries; recovery jobs for their progress.
  reads: { deliveries: DELIVERIES, outcomes: WEBHOOK_OUTCOMES, events: EVENTS, recoveries: RECOVERIES },
  outbox: true,
});

type WebhooksVars = StoreVars<typeof STORE>;
interface WebhooksMethods {
  ownWebhook(tenant: Tenant, id: string): Promise<WebhookDoc>;
  /** The webhook, refused (409) when disabled: what sends to it must wait until it is enabled. */
  enabledWebhook(tenant: Tenant, id: string, doing: string): Promise<WebhookDoc>;
  checkUrl(url: string, tenant: Required<Tenant>): Promise<string>;
  /** The views with their health (shared/api/wire.ts WebhookHealth): two bounded reads of the dispatcher's counters. */
  withHealth(tenant: Required<Tenant>, views: WebhookView[]): Promise<WebhookView[]>;
}
type Ctx<P> = Context<P, CallMeta>;

/** Webhook registrations and their delivery log. Sending is the webhook-dispatcher's job. */
const WebhooksService: ServiceSchema<PlatformSettings, WebhooksMethods, WebhooksVars> = {
  name: "webhooks",
  mixins: [StoreMixin(STORE)],

  actions: {
    /** POST /webhooks — webhooks:write; the only answer that shows the secret, with rotate-secret's. */
    create: {
      params: createParams,
      async handler(ctx: Ctx<CreateParams>): Promise<WebhookWithSecret> {
        const tenant = tenantOf(ctx);
        const events = checkSubscription(ctx.params.events);
        const url = await this.checkUrl(ctx.params.url, tenant);
        const limit = QUOTAS.webhooks_per_environment;
        await checkCountQuota(this.webhooks, tenant, {}, "webhooks_per_environment", limit, "webhooks per environment");
        const at = nowIso();
        const doc: WebhookDoc = {
          id: newId("wh"),
          ...tenant,
          url,
          events,
          description: ctx.params.description ?? null,
          rate_limit: ctx.params.rate_limit ?? null,
          status: "enabled",
          disabled_reason: null,
          secret: generateSecret(),
          previous_secrets: [],
          consecutive_failures: 0,
          created_at: at,
          updated_at: at,
        };
        await this.webhooks.insert(doc);
        return { ...webhookView(doc), secret: doc.secret };
      },
    },

    /** GET /webhooks — webhooks:read */
    list: {
      params: listParams,
      async handler(ctx: Ctx<ListParams>): Promise<ListResult<WebhookView>> {
        const filter: Filter = ctx.params.status ? { status: ctx.params.status } : {};
        const tenant = tenantOf(ctx);
        const page = await newestFirst(this.webhooks, tenant, filter, ctx.params, webhookView);
        return { ...page, items: await this.withHealth(tenant, page.items) };
      },
    },

    /** GET /webhooks/{id} — webhooks:read */
    get: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WebhookView> {
        const tenant = tenantOf(ctx);
        const [view] = await this.withHealth(tenant, [webhookView(await this.ownWebhook(tenant, ctx.params.id))]);
        return view;
      },
    },

    /** PATCH /webhooks/{id} — webhooks:write; `status: "enabled"` turns a disabled webhook back on. */
    update: {
      params: updateParams,
      async handler(ctx: Ctx<UpdateParams>): Promise<WebhookView> {
        const tenant = tenantOf(ctx);
        const current = await this.ownWebhook(tenant, ctx.params.id);
        const { url, events, description, rate_limit, status } = ctx.params;
        const set: Partial<WebhookDoc> = { updated_at: nowIso() };
        if (url !== undefined) set.url = await this.checkUrl(url, tenant);
        if (events !== undefined) set.events = checkSubscription(events);
        if (description !== undefined) set.description = description;
        if (rate_limit !== undefined) set.rate_limit = rate_limit;
        if (status !== undefined && status !== current.status) {
          set.status = status;
          set.disabled_reason = status === "disabled" ? "disabled through the API" : null;
          set.consecutive_failures = 0;
        }
        const updated = await this.webhooks.update(tenant, { id: current.id }, { $set: set });
        if (!updated) throw notFound("webhook", ctx.params.id);
        return webhookView(updated);
      },
    },

    /** DELETE /webhooks/{id} — webhooks:write; its deliveries go with it. */
    remove: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WebhookView> {
        const tenant = tenantOf(ctx);
        const webhook = await this.ownWebhook(tenant, ctx.params.id);
        // The delivery log is the dispatcher's: it deletes the webhook's deliveries and their counts,
        // first, so a dispatcher that cannot be reached (503) leaves the webhook as it was.
        await ctx.call("webhook-dispatcher.forget", { org_id: webhook.org_id, webhook_id: webhook.id });
        const removed = await this.webhooks.delete(tenant, { id: webhook.id });
        if (!removed) throw notFound("webhook", ctx.params.id);
        // After the deletion (the event never tells of one that did not happen), through the outbox.
        await this.outbox.recordWith([], {
          ...tenant,
          type: "webhook.deleted",
          data: { webhook_id: removed.id, url: removed.url, deleted_at: nowIso(), deleted_by: actorOf(ctx) },
          source: "webhooks",
        });
        return webhookView(removed);
      },
    },

    /**
     * POST /webhooks/{id}/rotate-secret — webhooks:write; the old secret keeps signing for 24 h. At
     * most two secrets sign at once: rotating again retires the older overlap at once, so a
     * delivery never carries more than two signatures.
     */
    rotateSecret: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WebhookWithSecret> {
        const tenant = tenantOf(ctx);
        const current = await this.ownWebhook(tenant, ctx.params.id);
        const now = Date.now();
        const secret = generateSecret();
        const updated = await this.webhooks.update(
          tenant,
          { id: current.id, secret: current.secret },
          {
            $set: {
              secret,
              previous_secrets: [{ secret: current.secret, expires_at: new Date(now + ROTATION_OVERLAP_MS).toISOString() }],
              updated_at: nowIso(),
            },
          },
        );
        if (!updated) throw new ApiError("invalid_state", "The secret was rotated meanwhile; retry", { param: "id" });
        return { ...webhookView(updated), secret };
      },
    },

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
          id: delivery.id,
        });
      },
    },

    /**
     * POST /webhooks/{id}/test — webhooks:write; a signed example event of a subscribed type
     * (`event_type`, by default the first), sent to this webhook alone and marked `test: true` in
     * its body and on the delivery. Its data: the system type's example, or the latest stored
     * event of that type's data (or {}).
     */
    test: {
      params: testParams,
      async handler(ctx: Ctx<TestParams>): Promise<DeliveryView> {
        const tenant = tenantOf(ctx);
        const webhook = await this.enabledWebhook(tenant, ctx.params.id, "sending a test event");
        const { type, example } = testEventOf(webhook.events, ctx.params.event_type);
        let data = example;
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
          id: delivery.id,
          status: delivery.status,
          series_start: delivery.attempts.length,
        });
        return deliveryView(updated);
      },
    },

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
     * tenth exhausted delivery in a row disables the webhook and records `webhook.disabled`.
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
        const reason = `${counted.consecutive_failures} deliveries in a row failed all their attempts`;
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

  methods: {
    async withHealth(tenant: Required<Tenant>, views: WebhookView[]): Promise<WebhookView[]> {
      if (views.length === 0) return views;
      const ids = views.map((v) => v.id);
      // At most 24 hour rows per webhook of the page, and one `latest` row each.
      const [hours, latest] = await Promise.all([
        this.outcomes.find(tenant, { period: "hour", start: { $gte: last24hFrom(Date.now()) }, webhook_id: { $in: ids } }),
        this.outcomes.find(tenant, { id: { $in: ids.map((id) => `${id}.latest`) } }),
      ]);
      return views.map((view) => ({
        ...view,
        health: healthOf(
          latest.find((row) => row.webhook_id === view.id) ?? null,
          hours.filter((row) => row.webhook_id === view.id),
        ),
      }));
    },

    async ownWebhook(tenant, id) {
      const doc = await this.webhooks.get(tenant, id);
      if (!doc) throw notFound("webhook", id);
      return doc;
    },

    async enabledWebhook(tenant, id, doing) {
      const webhook = await this.ownWebhook(tenant, id);
      if (webhook.status !== "enabled") {
        throw new ApiError("invalid_state", `The webhook is disabled; enable it (PATCH status: enabled) before ${doing}`, { param: "id" });
      }
      return webhook;
    },

    async checkUrl(url, tenant) {
      const checked = await checkTargetUrl(url, {
        allowPrivate: this.settings.config.webhookAllowPrivateTargets,
        environment: tenant.environment,
      });
      return checked.href;
    },
  },
};

export default WebhooksService;
