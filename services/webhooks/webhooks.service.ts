import type { Context, ServiceSchema } from "moleculer";
import { actorOf, tenantOf, type CallMeta } from "../../shared/api/context";
import { ApiError, notFound } from "../../shared/errors";
import { QUOTAS, quotaExceeded, quotaWrite, releaseQuota } from "../../shared/records/quotas";
import { newId, nowIso } from "../../shared/ids";
import { checkTargetUrl } from "../../shared/net/net-guard";
import { healthOf, last24hFrom } from "../../shared/records/outcomes";
import { newestFirst, type ListResult } from "../../shared/api/pagination";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { StoreMixin } from "../../shared/runtime/store.mixin";
import type { Filter, Tenant } from "../../shared/storage/types";
import type { WebhookWithSecret } from "../../shared/api/wire";
import { DeliveryLogMixin } from "./delivery-log.mixin";
import { DispatcherCallsMixin } from "./dispatcher-calls.mixin";
import { checkSubscription, generateSecret, ROTATION_OVERLAP_MS, webhookView, type WebhookDoc, type WebhookView } from "./webhooks.logic";
import {
  createParams,
  idParams,
  listParams,
  updateParams,
  type CreateParams,
  type IdParams,
  type ListParams,
  type UpdateParams,
} from "./webhooks.params";
import { STORE, type WebhooksMethods, type WebhooksVars } from "./webhooks.types";

type Ctx<P> = Context<P, CallMeta>;

/** Webhook registrations and their delivery log. Sending is the webhook-dispatcher's job. */
const WebhooksService: ServiceSchema<PlatformSettings, WebhooksMethods, WebhooksVars> = {
  name: "webhooks",
  // The delivery log's API, and what the dispatcher asks for (see webhooks.types.ts).
  mixins: [StoreMixin(STORE), DeliveryLogMixin, DispatcherCallsMixin],

  actions: {
    /** POST /webhooks — webhooks:write; the only answer that shows the secret, with rotate-secret's. */
    create: {
      params: createParams,
      async handler(ctx: Ctx<CreateParams>): Promise<WebhookWithSecret> {
        const tenant = tenantOf(ctx);
        const events = checkSubscription(ctx.params.events);
        const url = await this.checkUrl(ctx.params.url, tenant);
        const quota = {
          counters: this.quota,
          tenant,
          quota: "webhooks_per_environment",
          limit: QUOTAS.webhooks_per_environment,
          what: "webhooks per environment",
          count: () => this.webhooks.count(tenant, {}, { limit: QUOTAS.webhooks_per_environment + 1 }),
        } as const;
        const taken = await quotaWrite(quota);
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
        // The webhook and its count together: the quota holds whatever the concurrency.
        if (!(await this.store.atomically([taken, { op: "insert", collection: this.webhooks, doc }]))) {
          throw quotaExceeded(quota.quota, quota.limit, quota.what);
        }
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
        await releaseQuota({ counters: this.quota, tenant, quota: "webhooks_per_environment" });
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
