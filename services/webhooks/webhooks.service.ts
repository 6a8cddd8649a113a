import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/context";
import { DELIVERIES, deliveryView, type DeliveryDoc, type DeliveryView } from "../../shared/deliveries";
import { ApiError, notFound } from "../../shared/errors";
import { checkCountQuota, QUOTAS } from "../../shared/quotas";
import { newId, nowIso } from "../../shared/ids";
import { checkTargetUrl } from "../../shared/net-guard";
import { newestFirst, type ListResult } from "../../shared/pagination";
import type { PlatformSettings } from "../../shared/platform";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/store-mixin";
import { collectionSpec, type Filter, type Tenant } from "../../shared/storage/types";
import type { WebhookWithSecret } from "../../shared/wire";
import {
  checkSubscription,
  DISABLE_AFTER_FAILURES,
  generateSecret,
  ROTATION_OVERLAP_MS,
  targetOf,
  webhookView,
  type Target,
  type WebhookDoc,
  type WebhookView,
} from "./webhooks.logic";
import {
  createParams,
  deliveriesParams,
  deliveryParams,
  idParams,
  listParams,
  outcomeParams,
  subscribersParams,
  targetParams,
  updateParams,
  type CreateParams,
  type DeliveriesParams,
  type DeliveryParams,
  type IdParams,
  type ListParams,
  type OutcomeParams,
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
  reads: { deliveries: DELIVERIES },
  outbox: true,
});

type WebhooksVars = StoreVars<typeof STORE>;
interface WebhooksMethods {
  ownWebhook(tenant: Tenant, id: string): Promise<WebhookDoc>;
  checkUrl(url: string, tenant: Required<Tenant>): Promise<string>;
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
        return newestFirst(this.webhooks, tenantOf(ctx), filter, ctx.params, webhookView);
      },
    },

    /** GET /webhooks/{id} — webhooks:read */
    get: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WebhookView> {
        return webhookView(await this.ownWebhook(tenantOf(ctx), ctx.params.id));
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

    /** GET /webhooks/{id}/deliveries — webhooks:read; the delivery log, newest first. */
    deliveries: {
      params: deliveriesParams,
      async handler(ctx: Ctx<DeliveriesParams>): Promise<ListResult<DeliveryView>> {
        const tenant = tenantOf(ctx);
        const webhook = await this.ownWebhook(tenant, ctx.params.id);
        const filter = { webhook_id: webhook.id, ...(ctx.params.status && { status: ctx.params.status }) };
        return newestFirst(this.deliveries, tenant, filter, ctx.params, deliveryView);
      },
    },

    /** GET /webhooks/{id}/deliveries/{delivery_id} — webhooks:read */
    delivery: {
      params: deliveryParams,
      async handler(ctx: Ctx<DeliveryParams>): Promise<DeliveryView> {
        const delivery = await this.deliveries.findOne(tenantOf(ctx), { id: ctx.params.delivery_id, webhook_id: ctx.params.id });
        if (!delivery) throw notFound("delivery", ctx.params.delivery_id);
        return deliveryView(delivery);
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
        if (webhook.status !== "enabled") {
          throw new ApiError("invalid_state", "The webhook is disabled; enable it (PATCH status: enabled) before redelivering", {
            param: "id",
          });
        }
        if (delivery.status === "pending")
          throw new ApiError("invalid_state", "The delivery is still pending: it has attempts left", { param: "delivery_id" });
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
      async handler(ctx: Context<OutcomeParams>): Promise<void> {
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
        await this.outbox.recordWith(
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
      },
    },
  },

  methods: {
    async ownWebhook(tenant, id) {
      const doc = await this.webhooks.get(tenant, id);
      if (!doc) throw notFound("webhook", id);
      return doc;
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
