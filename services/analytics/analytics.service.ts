import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { isDuplicate } from "../../shared/errors";
import { hourRowsFrom, RUN_OUTCOMES, WEBHOOK_OUTCOMES, type OutcomeRow } from "../../shared/records/outcomes";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { collectionSpec, type ReadView, type Tenant } from "../../shared/storage/types";
import type { UsageBatch } from "../../shared/records/usage";
import type { OutcomeReport, UsageReport } from "../../shared/api/wire";
import { deliveryOutcomes, groupBy, outcomeWindow, runOutcomes, usageBuckets, windowOf } from "./analytics.logic";
import { ingestParams, maintainParams, usageParams, windowParams, type UsageParams, type WindowParams } from "./analytics.params";
import { Tiers, tierSizes, type StoredRow, type TierState } from "./tiers";

const MAINTAIN_EVERY_MS = 60_000;
/** Minute rows are kept two days once folded into hours; day rows two years. Hours: USAGE_RETENTION_DAYS. */
const KEEP_MINUTES_MS = 2 * 24 * 60 * 60 * 1000;
const KEEP_DAYS_MS = 730 * 24 * 60 * 60 * 1000;

// Rows are only inserted and pruned, never updated: `start` can be the embedded store's range index.
const usageRows = (name: string) =>
  collectionSpec<StoredRow>(name, [{ fields: { org_id: 1, environment: 1, start: 1 } }, { fields: { start: 1 } }]);

/** Usage rows are this service's; the outcome counters belong to the dispatcher and the workflows service. */
const STORE = declareStore({
  owns: {
    usage: usageRows("usage_minutes"),
    usageHours: usageRows("usage_hours"),
    usageDays: usageRows("usage_days"),
    tierStates: collectionSpec<TierState>("usage_tiers"),
  },
  reads: { webhookOutcomes: WEBHOOK_OUTCOMES, runOutcomes: RUN_OUTCOMES },
});

interface AnalyticsVars extends StoreVars<typeof STORE> {
  tiers: Tiers;
  /** How long outcome hour rows are kept (as usage's hour rows). */
  hourKeepMs: number;
  maintainer: NodeJS.Timeout | undefined;
}
interface AnalyticsMethods {
  /** The counter rows answering a window (see outcomeWindow), and the window they cover. */
  outcomeRows<R extends OutcomeRow>(
    rows: ReadView<R>,
    tenant: Tenant,
    params: WindowParams,
  ): Promise<{ from: string; to: string; rows: R[] }>;
  maintainAll(now?: number): Promise<{ folded: number; pruned: number }>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * Usage analytics: the gateways' metered requests (see shared/records/usage.ts), and run and delivery
 * outcomes from the counters the workflows service and the webhook dispatcher keep as they happen
 * (see shared/records/outcomes.ts). Any number of analytics nodes may run: ingesting is idempotent per
 * batch row, and questions read only the store, a bounded number of rows each.
 */
const AnalyticsService: ServiceSchema<PlatformSettings, AnalyticsMethods, AnalyticsVars> = {
  name: "analytics",
  mixins: [StoreMixin(STORE)],

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
        return this.maintainAll(ctx.params.now);
      },
    },

    /** GET /analytics/usage — analytics:read; requests per hour or day, optionally per route, status or key. */
    usage: {
      params: usageParams,
      async handler(ctx: Ctx<UsageParams>): Promise<UsageReport> {
        const { granularity, group_by } = ctx.params;
        const window = windowOf(ctx.params.from, ctx.params.to, granularity);
        const rows = await this.tiers.rowsFor(tenantOf(ctx), window.from, window.to, granularity);
        return {
          object: "usage_report",
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
      async handler(ctx: Ctx<WindowParams>): Promise<OutcomeReport> {
        const { from, to, rows } = await this.outcomeRows(this.runOutcomes, tenantOf(ctx), ctx.params);
        return {
          object: "outcome_report",
          from,
          to,
          ...runOutcomes(rows),
          workflows: groupBy(rows, (r) => r.workflow_id).map(([workflow_id, mine]) => ({ workflow_id, ...runOutcomes(mine) })),
        };
      },
    },

    /** GET /analytics/webhooks — analytics:read; deliveries created in the window and their attempts, by status and webhook. */
    webhooks: {
      params: windowParams,
      async handler(ctx: Ctx<WindowParams>): Promise<OutcomeReport> {
        const { from, to, rows } = await this.outcomeRows(this.webhookOutcomes, tenantOf(ctx), ctx.params);
        return {
          object: "outcome_report",
          from,
          to,
          ...deliveryOutcomes(rows),
          webhooks: groupBy(rows, (r) => r.webhook_id).map(([webhook_id, mine]) => ({ webhook_id, ...deliveryOutcomes(mine) })),
        };
      },
    },
  },

  methods: {
    async outcomeRows(rows, tenant, params) {
      const now = Date.now();
      const asked = windowOf(params.from, params.to, "hour", now);
      const window = outcomeWindow(asked.from, asked.to, hourRowsFrom(now, this.hourKeepMs));
      const parts = await Promise.all(window.parts.map((p) => rows.find(tenant, { period: p.period, start: { $gte: p.from, $lt: p.to } })));
      return { from: new Date(window.from).toISOString(), to: new Date(window.to).toISOString(), rows: parts.flat() };
    },

    maintainAll(now = Date.now()) {
      return this.tiers.maintain(now);
    },
  },

  created() {
    this.hourKeepMs = this.settings.config.usageRetentionDays * tierSizes.day;
    this.tiers = new Tiers(
      [
        { name: "minute", size: tierSizes.minute, rows: this.usage, keepMs: KEEP_MINUTES_MS },
        { name: "hour", size: tierSizes.hour, rows: this.usageHours, keepMs: this.hourKeepMs },
        { name: "day", size: tierSizes.day, rows: this.usageDays, keepMs: KEEP_DAYS_MS },
      ],
      this.tierStates,
    );
  },

  started() {
    this.maintainer = setInterval(
      () => void this.maintainAll().catch((err) => this.logger.warn("usage roll-up failed; the next one retries", err)),
      MAINTAIN_EVERY_MS,
    );
    this.maintainer.unref();
  },

  stopped() {
    clearInterval(this.maintainer);
  },
};

export default AnalyticsService;
