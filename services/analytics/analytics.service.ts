import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/context";
import { DELIVERY_STATUSES, deliveriesCollection, type DeliveryDoc } from "../../shared/deliveries";
import { isDuplicate } from "../../shared/errors";
import { eventsCollection, type EventDoc } from "../../shared/events";
import { settingsOf } from "../../shared/runtime";
import { StoreMixin } from "../../shared/store-mixin";
import type { Collection, Store } from "../../shared/storage/types";
import type { UsageBatch } from "../../shared/usage";
import { outcomes, usageBuckets, windowOf } from "./analytics.logic";
import { ingestParams, maintainParams, usageParams, windowParams, type UsageParams, type WindowParams } from "./analytics.params";
import { Tiers, tierSizes, type StoredRow, type TierState } from "./tiers";

const RUN_OUTCOMES = ["succeeded", "failed", "cancelled"] as const;
const MAINTAIN_EVERY_MS = 60_000;
/** Minute rows are kept two days once folded into hours; day rows two years. Hours: USAGE_RETENTION_DAYS. */
const KEEP_MINUTES_MS = 2 * 24 * 60 * 60 * 1000;
const KEEP_DAYS_MS = 730 * 24 * 60 * 60 * 1000;

interface AnalyticsVars {
  store: Store;
  usage: Collection<StoredRow>;
  tiers: Tiers;
  events: Collection<EventDoc>;
  deliveries: Collection<DeliveryDoc>;
  maintainer: NodeJS.Timeout | undefined;
}
type AnalyticsMethods = Record<string, never>;
type Ctx<P> = Context<P, CallMeta>;

/**
 * Usage analytics: the gateways' metered requests (see shared/usage.ts), and run and delivery
 * outcomes read from the event log and the delivery log. Any number of analytics nodes may run:
 * ingesting is idempotent per batch row, and questions read only the store.
 */
const AnalyticsService: ServiceSchema<ServiceSettingSchema, AnalyticsMethods, AnalyticsVars> = {
  name: "analytics",
  mixins: [StoreMixin],

  actions: {
    /** Internal (gateways): stores a batch of usage rows; a batch sent again stores nothing twice. */
    ingest: {
      visibility: "public",
      params: ingestParams,
      async handler(ctx: Context<UsageBatch>): Promise<number> {
        let stored = 0;
        await Promise.all(
          ctx.params.rows.map(async (row, i) => {
            try {
              const { minute, ...rest } = row;
              await this.usage.insert({ ...rest, start: minute, id: `${ctx.params.batch_id}.${i}` });
              stored += 1;
            } catch (err) {
              if (!isDuplicate(err)) throw err;
            }
          }),
        );
        return stored;
      },
    },

    /** Internal (operators, tests): folds closed periods into hour and day rows and prunes, as of `now`. */
    maintain: {
      visibility: "public",
      params: maintainParams,
      handler(ctx: Context<{ now?: number }>) {
        return this.tiers.maintain(ctx.params.now);
      },
    },

    /** GET /analytics/usage — analytics:read; requests per hour or day, optionally per route, status or key. */
    usage: {
      params: usageParams,
      async handler(ctx: Ctx<UsageParams>) {
        const { granularity, group_by } = ctx.params;
        const window = windowOf(ctx.params.from, ctx.params.to, granularity);
        const rows = await this.tiers.rowsFor(tenantOf(ctx), window.from, window.to);
        return {
          from: new Date(window.from).toISOString(),
          to: new Date(window.to).toISOString(),
          granularity,
          group_by: group_by ?? null,
          buckets: usageBuckets(rows, window, granularity, group_by),
        };
      },
    },

    /** GET /analytics/workflows — analytics:read; runs that ended in the window, by status and workflow. */
    workflows: {
      params: windowParams,
      async handler(ctx: Ctx<WindowParams>) {
        const window = windowOf(ctx.params.from, ctx.params.to, "hour");
        const ended = await this.events.find(tenantOf(ctx), {
          type: "workflow.completed",
          created_at: { $gte: new Date(window.from).toISOString(), $lt: new Date(window.to).toISOString() },
        });
        const byWorkflow = new Map<string, (typeof RUN_OUTCOMES)[number][]>();
        for (const e of ended) {
          const id = String(e.data.workflow_id);
          byWorkflow.set(id, [...(byWorkflow.get(id) ?? []), e.data.status as (typeof RUN_OUTCOMES)[number]]);
        }
        return {
          from: new Date(window.from).toISOString(),
          to: new Date(window.to).toISOString(),
          ...outcomes(RUN_OUTCOMES, ended.map((e) => e.data.status as (typeof RUN_OUTCOMES)[number])),
          workflows: [...byWorkflow].map(([workflow_id, statuses]) => ({ workflow_id, ...outcomes(RUN_OUTCOMES, statuses) })),
        };
      },
    },

    /** GET /analytics/webhooks — analytics:read; deliveries created in the window, by status and webhook. */
    webhooks: {
      params: windowParams,
      async handler(ctx: Ctx<WindowParams>) {
        const window = windowOf(ctx.params.from, ctx.params.to, "hour");
        const made = await this.deliveries.find(tenantOf(ctx), {
          created_at: { $gte: new Date(window.from).toISOString(), $lt: new Date(window.to).toISOString() },
        });
        const byWebhook = new Map<string, DeliveryDoc["status"][]>();
        for (const d of made) byWebhook.set(d.webhook_id, [...(byWebhook.get(d.webhook_id) ?? []), d.status]);
        return {
          from: new Date(window.from).toISOString(),
          to: new Date(window.to).toISOString(),
          ...outcomes(DELIVERY_STATUSES, made.map((d) => d.status)),
          webhooks: [...byWebhook].map(([webhook_id, statuses]) => ({ webhook_id, ...outcomes(DELIVERY_STATUSES, statuses) })),
        };
      },
    },
  },

  methods: {},

  created() {
    // Rows are only inserted and pruned, never updated: `start` can be the embedded store's range index.
    const rows = (name: string) => this.store.collection<StoredRow>(name, [{ fields: { org_id: 1, environment: 1, start: 1 } }, { fields: { start: 1 } }]);
    this.usage = rows("usage_minutes");
    const hourKeepMs = settingsOf(this.broker).usageRetentionDays * tierSizes.day;
    this.tiers = new Tiers(
      [
        { name: "minute", size: tierSizes.minute, rows: this.usage, keepMs: KEEP_MINUTES_MS },
        { name: "hour", size: tierSizes.hour, rows: rows("usage_hours"), keepMs: hourKeepMs },
        { name: "day", size: tierSizes.day, rows: rows("usage_days"), keepMs: KEEP_DAYS_MS },
      ],
      this.store.collection<TierState>("usage_tiers"),
    );
    this.events = eventsCollection(this.store);
    this.deliveries = deliveriesCollection(this.store);
  },

  started() {
    this.maintainer = setInterval(() => void this.tiers.maintain().catch((err) => this.logger.warn("usage roll-up failed; the next one retries", err)), MAINTAIN_EVERY_MS);
    this.maintainer.unref();
  },

  stopped() {
    clearInterval(this.maintainer);
  },
};

export default AnalyticsService;
