import type { Context, ServiceSchema } from "moleculer";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { GAUGE_COUNT_CAP } from "../../shared/runtime/metrics";
import { firstIdAt, prune, retentionCutoff } from "../../shared/records/retention";
import { ALL_TENANTS } from "../../shared/storage/types";
import { MANUAL_THROTTLE_SUFFIX } from "./delivery-actions.mixin";
import { forgetParams, type ForgetParams } from "./dispatcher.params";
import type { DispatcherMethods, DispatcherVars } from "./dispatcher.types";

/** What keeps the delivery log bounded and watched: a deleted webhook's log goes, old deliveries are pruned, the backlog is measured. */
const UpkeepSchema: Partial<ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars>> = {
  actions: {
    /** Internal, for the webhooks service: a deleted webhook's delivery log and delivery counts go with it. */
    forget: {
      visibility: "public",
      params: forgetParams,
      async handler(ctx: Context<ForgetParams>): Promise<number> {
        const tenant = { org_id: ctx.params.org_id };
        this.sender.drop(ctx.params.webhook_id);
        await this.throttle.forget(ctx.params.org_id, ctx.params.webhook_id);
        await this.throttle.forget(ctx.params.org_id, `${ctx.params.webhook_id}${MANUAL_THROTTLE_SUFFIX}`);
        const removed = await this.deliveries.deleteMany(tenant, { webhook_id: ctx.params.webhook_id });
        await this.outcomes.deleteMany(tenant, { webhook_id: ctx.params.webhook_id });
        return removed;
      },
    },
  },

  methods: {
    async measureBacklog() {
      const now = Date.now();
      const [due, next] = await Promise.all([
        this.deliveries.count(ALL_TENANTS, { due_at: { $lte: now } }, { limit: GAUGE_COUNT_CAP }),
        this.deliveries.find(ALL_TENANTS, { due_at: { $exists: true } }, { sort: { due_at: 1 }, limit: 100 }),
      ]);
      const oldest = next.reduce((min, d) => Math.min(min, Date.parse(d.created_at)), now);
      this.metrics.set("due", due);
      this.metrics.set("queued", this.lanes.size);
      this.metrics.set("oldestPending", (now - oldest) / 1000);
    },

    async pruneDeliveries(now, control) {
      const before = firstIdAt("del", retentionCutoff(this.settings.config.eventRetentionDays, now));
      // By creation (ids sort by time); a pending delivery (retrying, or redelivered) stays until it settles.
      const deliveries = await prune(
        { collection: this.deliveries, field: "id", before, removable: { status: { $in: ["succeeded", "failed"] } } },
        control,
      );
      // Listener sessions as old as the deliveries pruned (their ids are ULIDs of their opening time).
      const sessions = await prune(
        { collection: this.listenerSessions, field: "id", before: `ls_${before.slice(4)}`, removable: {} },
        control,
      );
      return deliveries + sessions;
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const UpkeepMixin = UpkeepSchema as Partial<ServiceSchema>;
