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
import type { RunsMethods, RunsVars } from "./runs.mixin";
import { eventView, listenersOf, passes } from "./trigger-match";
import type { WorkflowDoc } from "./workflows.logic";

const SWEEP_MS = 500;

interface TriggersVars extends RunsVars {
  consumer: EventConsumer;
  sweeper: NodeJS.Timeout | undefined;
}
interface TriggersMethods extends RunsMethods {
  /** Starts the runs one tenant's events trigger; answers the events not done. */
  trigger(tenant: Required<Tenant>, events: EventDoc[]): Promise<Set<string>>;
  /** Whether `event` starts `workflow` (its type or pattern, and its filter); a filter that fails says why in the log. */
  passes(workflow: WorkflowDoc, event: EventDoc): boolean;
  /** A run the budget refused: a warning, and once per chain the `workflow.chain_limited` event. */
  chainLimited(tenant: Required<Tenant>, root: string, event: EventDoc, workflowId: string): Promise<void>;
}

/**
 * The event trigger: stored events marked "untriggered" start the runs of the active workflows
 * listening for their type, within the chain's run budget. A mixin of the workflows service, after
 * the runs mixin (runs.service.ts), whose collections, engine and budgets it uses.
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
      const started: string[] = [];
      const listening = await listenersOf(
        this.workflows,
        tenant,
        events.map((e: EventDoc) => e.type),
      );
      const now = Date.now();
      await Promise.all(
        events.map(async (event: EventDoc) => {
          const targets = listening
            // Type, pattern and filter (trigger-match.ts): an event that does not pass costs no write.
            .filter((wf) => wf.id !== event.origin_workflow_id && this.passes(wf, event))
            // Workflows that start each other through their events stop after MAX_CHAIN_DEPTH runs.
            .filter(() => {
              if ((event.chain_depth ?? 0) < MAX_CHAIN_DEPTH) return true;
              this.logger.warn(`event ${event.id} (${event.type}) starts no run: ${MAX_CHAIN_DEPTH} event-started runs led to it`);
              return false;
            });
          if (targets.length === 0) return;
          const root = event.chain_root ?? event.id;
          const budget = {
            id: root,
            limit: QUOTAS.runs_per_event_chain,
            expiresAt: now + this.settings.config.eventRetentionDays * DAY_MS,
          };
          try {
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
                  if (await this.startCounted(tenant, budget, run)) started.push(run.id);
                  else await this.chainLimited(tenant, root, event, wf.id);
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
      for (const id of started) this.engine.wake(id);
      return incomplete;
    },

    passes(workflow, event) {
      const { ok, why } = passes(workflow.trigger, event);
      if (why) this.logger.info(`event ${event.id} (${event.type}) starts no run of workflow ${workflow.id}: ${why}`);
      return ok;
    },

    async chainLimited(tenant, root, event, workflowId) {
      const limit = QUOTAS.runs_per_event_chain;
      this.logger.warn(
        `event ${event.id} (${event.type}) does not start workflow ${workflowId}: its chain (root event ${root}) has started ${limit} runs, the most one event may set off`,
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
          data: { root_event_id: root, event_id: event.id, workflow_id: workflowId, limit },
          source: "workflows",
          chain_depth: event.chain_depth,
          chain_root: root,
        },
      );
    },
  },

  created() {
    this.consumer = new EventConsumer(
      this.events,
      "untriggered_since",
      (tenant, events) => this.trigger(tenant, events),
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
