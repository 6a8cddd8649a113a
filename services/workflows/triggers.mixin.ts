import { traceOf } from "../../shared/runtime/trace";
import type { Context, ServiceSchema } from "moleculer";
import { isDuplicate } from "../../shared/errors";
import { EventConsumer } from "../../shared/runtime/event-consumer";
import { EVENT_STORED, unmarkThrough, type EventDoc } from "../../shared/records/events";
import { nowIso } from "../../shared/ids";
import { QUOTAS } from "../../shared/records/quotas";
import { DAY_MS } from "../../shared/records/retention";
import type { PlatformSettings } from "../../shared/runtime/platform";
import type { Tenant } from "../../shared/storage/types";
import { MAX_CHAIN_DEPTH, newRun } from "./runs.logic";
import type { Budget } from "./run-starts.mixin";
import type { RunsMethods, RunsVars } from "./runs.mixin";
import { eventView, listenersOf, passes } from "./trigger-match";
import type { WorkflowDoc } from "./workflows.logic";

const SWEEP_MS = 500;
const MINUTE_MS = 60_000;

interface TriggersVars extends RunsVars {
  consumer: EventConsumer;
  /** Environments whose RUN_STARTS_PER_MINUTE is spent, until when (epoch ms). */
  startsSpent: Map<string, number>;
  sweeper: NodeJS.Timeout | undefined;
}
interface TriggersMethods extends RunsMethods {
  /** Starts the runs one tenant's events trigger; answers the events not done. */
  trigger(tenant: Required<Tenant>, events: EventDoc[]): Promise<Set<string>>;
  /**
   * A run its chain refused (`runs`: the chain's budget is spent; `depth`: MAX_CHAIN_DEPTH runs in
   * a row led to the event): a warning, and once per chain the `workflow.chain_limited` event.
   */
  chainLimited(tenant: Required<Tenant>, root: string, event: EventDoc, workflowId: string, reason: "runs" | "depth"): Promise<void>;
  /** RUN_STARTS_PER_MINUTE refused an event-started run: the environment's events wait for the next minute (logged once). */
  startsRefused(tenant: Required<Tenant>, starts: Budget): void;
  /** Whether `event` starts `workflow` (its type or pattern, and its filter); a filter that fails says why in the log. */
  passes(workflow: WorkflowDoc, event: EventDoc): boolean;
}

/**
 * The event trigger: stored events marked "untriggered" start the runs of the active workflows
 * listening for their type, within the chain's run budget. A mixin of the workflows service, after
 * the runs mixin (runs.mixin.ts), whose collections, engine and budgets it uses.
 */
export const TriggersMixin: Partial<ServiceSchema<PlatformSettings, TriggersMethods, TriggersVars>> = {
  events: {
    /** Wake-up from whoever stored an event; one workflows node gets each. */
    [EVENT_STORED]: {
      handler(ctx: Context<{ event: EventDoc }>) {
        this.consumer.wake(ctx.params.event);
      },
    },
  },

  methods: {
    async trigger(tenant, events) {
      const incomplete = new Set<string>();
      const now = Date.now();
      // Budgets count by the platform's clock (a test's own in tests).
      const minuteNow = this.settings.clock.now();
      // This environment's RUN_STARTS_PER_MINUTE is spent: its events wait (marked, for the sweep) for the next minute.
      const key = `${tenant.org_id}/${tenant.environment}`;
      if ((this.startsSpent.get(key) ?? 0) > minuteNow) return new Set(events.map((e: EventDoc) => e.id));
      this.startsSpent.delete(key);
      const started: string[] = [];
      const listening = await listenersOf(
        this.workflows,
        tenant,
        events.map((e: EventDoc) => e.type),
      );
      const starts = this.startsBudget(tenant, minuteNow);
      await Promise.all(
        events.map(async (event: EventDoc) => {
          // Type, pattern and filter (trigger-match.ts): an event that does not pass costs no write.
          const targets = listening.filter((wf) => wf.id !== event.origin_workflow_id && this.passes(wf, event));
          if (targets.length === 0) return;
          const root = event.chain_root ?? event.id;
          const budget = {
            id: root,
            limit: QUOTAS.runs_per_event_chain,
            expiresAt: now + this.settings.config.eventRetentionDays * DAY_MS,
          };
          try {
            // Workflows that start each other through their events stop after MAX_CHAIN_DEPTH runs in a row.
            if ((event.chain_depth ?? 0) >= MAX_CHAIN_DEPTH) {
              await this.chainLimited(tenant, root, event, targets[0].id, "depth");
              return;
            }
            // A root event opens its chain's budget once; later links find it (or reopen it when pruned).
            if (event.chain_root === undefined) await this.openBudget(tenant, root, budget.expiresAt);
            await Promise.all(
              targets.map(async (wf) => {
                const input = { event: eventView(event) };
                const run = {
                  ...traceOf(event),
                  ...newRun(
                    wf,
                    input,
                    { type: "event", event_id: event.id, event_type: event.type },
                    now,
                    (event.chain_depth ?? 0) + 1,
                    root,
                  ),
                };
                try {
                  const spent = await this.startCounted(tenant, [budget, starts], run);
                  if (spent === null) started.push(run.id);
                  else if (spent === budget) await this.chainLimited(tenant, root, event, wf.id, "runs");
                  else {
                    incomplete.add(event.id);
                    this.startsRefused(tenant, starts);
                  }
                } catch (err) {
                  // Started already (a sweep racing a wake-up); anything else: the sweep retries.
                  if (!isDuplicate(err)) incomplete.add(event.id);
                }
              }),
            );
          } catch {
            incomplete.add(event.id);
          }
        }),
      );
      for (const id of started) this.engine.wake(id, tenant);
      return incomplete;
    },

    passes(workflow, event) {
      const { ok, why } = passes(workflow.trigger, event);
      if (why) this.logger.info(`event ${event.id} (${event.type}) starts no run of workflow ${workflow.id}: ${why}`);
      return ok;
    },

    startsRefused(tenant, starts) {
      const key = `${tenant.org_id}/${tenant.environment}`;
      const now = this.settings.clock.now();
      const until = now - (now % MINUTE_MS) + MINUTE_MS;
      if ((this.startsSpent.get(key) ?? 0) >= until) return;
      this.startsSpent.set(key, until);
      this.logger.warn(
        `org ${tenant.org_id} (${tenant.environment}): event-started runs wait for the next minute: ${starts.limit} runs were started this minute (RUN_STARTS_PER_MINUTE)`,
      );
    },

    async chainLimited(tenant, root, event, workflowId, reason) {
      const limit = reason === "runs" ? QUOTAS.runs_per_event_chain : MAX_CHAIN_DEPTH;
      this.logger.warn(
        reason === "runs"
          ? `event ${event.id} (${event.type}) does not start workflow ${workflowId}: its chain (root event ${root}) has started ${limit} runs, the most one event may set off`
          : `event ${event.id} (${event.type}) starts no run: ${limit} event-started runs in a row led to it (root event ${root})`,
      );
      // The trace, once per chain: the first refusal marks the budget and stores workflow.chain_limited with it.
      await this.outbox.recordWith(
        [
          {
            op: "update",
            collection: this.budgets,
            scope: tenant,
            filter: { id: root, limited_at: { $exists: false } },
            update: { $set: { limited_at: nowIso() } },
          },
        ],
        {
          ...tenant,
          type: "workflow.chain_limited",
          data: { root_event_id: root, event_id: event.id, workflow_id: workflowId, reason, limit },
          source: "workflows",
          chain_depth: event.chain_depth,
          chain_root: root,
        },
      );
    },
  },

  created() {
    this.startsSpent = new Map();
    this.consumer = new EventConsumer(
      this.events,
      "untriggered_since",
      // The runs the events start, and the waiting runs they resume or cancel (waits.mixin.ts).
      async (tenant, events) => {
        const [started, resolved] = await Promise.all([this.trigger(tenant, events), this.resolveWaits(tenant, events)]);
        return new Set([...started, ...resolved]);
      },
      this.logger,
      unmarkThrough(this.broker),
    );
  },

  started() {
    this.sweeper = setInterval(() => void this.consumer.sweep(), SWEEP_MS);
    this.sweeper.unref();
  },

  stopped() {
    clearInterval(this.sweeper);
    this.consumer.stop();
  },
};
