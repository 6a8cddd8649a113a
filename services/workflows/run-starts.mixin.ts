import type { ServiceSchema } from "moleculer";
import { ApiError, isDuplicate } from "../../shared/errors";
import type { PlatformSettings } from "../../shared/runtime/platform";
import type { Tenant } from "../../shared/storage/types";
import { RUN_DUE, type RunEngine } from "./engine";
import type { FlowGate } from "./flow-gate";
import { overBudget } from "./flow-control.logic";
import type { RunDoc } from "./run-doc";
import { runView, type RunView } from "./run-view.logic";
import type { WorkflowsStoreVars } from "./workflows.store";

const MINUTE_MS = 60_000;

/** A count of runs started (workflows.store.ts BudgetDoc) and its limit. */
export interface Budget {
  id: string;
  limit: number;
  expiresAt: number;
}

/** The store's collections (workflows.store.ts) and the engine that may take a new run at once. */
export interface RunStartsVars extends WorkflowsStoreVars {
  engine: RunEngine;
  /** Lets runs held behind their workflow's flow control go (flow-gate.ts). */
  flowGate: FlowGate;
}
export interface RunStartsMethods {
  /**
   * Stores a run started through the API (counted against RUN_STARTS_PER_MINUTE) and wakes the
   * engine. Over the budget: 429, or with `queue` (a run already accepted, such as an inbound
   * request's) stored queued until a minute has room for it.
   */
  startApiRun(tenant: Required<Tenant>, run: RunDoc, queue?: boolean): Promise<RunView>;
  /** The budget of RUN_STARTS_PER_MINUTE of the minute `now` falls in: every way of starting a run counts against it. */
  startsBudget(tenant: Required<Tenant>, now: number): Budget;
  /** Creates the budget `id`, unless it exists. */
  openBudget(tenant: Required<Tenant>, id: string, expiresAt: number): Promise<void>;
  /**
   * Stores `run` and counts it against each budget, all or none; answers null, or the budget that is
   * spent. A held run's key is pumped (flow-gate.ts), unless the caller `awaited` to do it. A
   * debounced run whose key has a run pending joins it instead, and takes that run's id.
   */
  startCounted(tenant: Required<Tenant>, budgets: Budget[], run: RunDoc, awaited?: boolean): Promise<Budget | null>;
}

/**
 * Starting runs under their budgets (the starts per minute of an environment; for event-started
 * runs also their chain's), each counted in the write that stores the run. A mixin of the
 * workflows service; the runs mixin (runs.mixin.ts) and the trigger mixin (triggers.mixin.ts)
 * start runs through it.
 */
export const RunStartsMixin: Partial<ServiceSchema<PlatformSettings, RunStartsMethods, RunStartsVars>> = {
  methods: {
    startsBudget(tenant, now) {
      const minute = now - (now % MINUTE_MS);
      const limit = this.settings.config.runStartsPerMinute;
      return { id: `starts/${tenant.org_id}/${tenant.environment}/${minute}`, limit, expiresAt: minute + 60 * MINUTE_MS };
    },

    async startApiRun(tenant, run, queue = false) {
      // The platform's clock: a test's own in tests (shared/runtime/clock.ts).
      // A run's documents are counted, not checked, as they are written (the engine's writes must go
      // on): a tenant at its storage quota is refused new runs here instead.
      await this.store.checkStorageQuota(tenant);
      const now = this.settings.clock.now();
      const budget = this.startsBudget(tenant, now);
      const { limit } = budget;
      const minute = budget.expiresAt - 60 * MINUTE_MS;
      // Stored already claimed by this node's engine when it has room, an http step first shown
      // running (the claim's and the engine's first write fewer, and no wake-up to send);
      // otherwise queued and due now, for any node's engine.
      // A run held behind its workflow's flow control is never claimed at once.
      const held = run.held_at !== undefined || run.debounce_key !== undefined;
      const claimed = held ? null : this.engine.reserve(run);
      let counted = false;
      try {
        counted = (await this.startCounted(tenant, [budget], claimed ?? run, held)) === null;
      } finally {
        if (claimed && !counted) this.engine.unreserve(run);
      }
      if (!counted && queue && run.debounce_key === undefined) {
        const waiting = overBudget(run, limit, minute + MINUTE_MS, now);
        await this.startCounted(tenant, [], waiting, true);
        return runView(waiting);
      }
      if (!counted) {
        throw new ApiError(
          "rate_limited",
          `Quota runs_started_per_minute reached: at most ${limit} runs may be started per minute in this environment`,
          {
            quota: "runs_started_per_minute",
            limit,
            retry_after: Math.max(1, Math.ceil((minute + MINUTE_MS - now) / 1000)),
          },
        );
      }
      if (claimed) this.engine.adopt(claimed);
      else if (held) {
        // Shown as its key's gate left it: let go at once when the key has room, else queued and why.
        if (run.flow_key !== undefined && run.debounce_key === undefined) await this.flowGate.pump(tenant, run.flow_key);
        return runView((await this.runs.get(tenant, run.id)) ?? run);
      }
      // A lost wake-up only delays the run until a node's next poll.
      else this.broker.emit(RUN_DUE, { id: run.id, ...tenant }).catch(() => undefined);
      return runView(claimed ?? run);
    },

    async openBudget(tenant, id, expiresAt) {
      try {
        await this.budgets.insert({ id, ...tenant, runs: 0, expires_at: new Date(expiresAt).toISOString() });
      } catch (err) {
        if (!isDuplicate(err)) throw err;
      }
    },

    async startCounted(tenant, budgets, run, awaited = false) {
      // A start of a debounced key with a run pending joins it: one run per burst, counted once.
      if (run.debounce_key !== undefined && (await this.flowGate.joinBurst(tenant, run))) return null;
      for (let tries = 0; tries <= budgets.length; tries += 1) {
        // The counts and the run are stored together: a run that exists was counted once, a
        // duplicate (the run started already) takes nothing, and two nodes never both take the last.
        let written: unknown;
        try {
          written = await this.store.atomically([
            ...budgets.map(({ id, limit }: Budget) => ({
              op: "update" as const,
              collection: this.budgets,
              scope: tenant,
              filter: { id, runs: { $lt: limit } },
              update: { $inc: { runs: 1 } },
            })),
            { op: "insert", collection: this.runs, doc: run },
          ]);
        } catch (err) {
          // Two starts of one debounced key at once: the second joins the first's run.
          if (isDuplicate(err) && run.debounce_key !== undefined && (await this.flowGate.joinBurst(tenant, run))) return null;
          throw err;
        }
        if (written) {
          if (run.held_at !== undefined && run.flow_key !== undefined && !awaited) void this.flowGate.pump(tenant, run.flow_key);
          return null;
        }
        for (const budget of budgets) {
          const stored = await this.budgets.get(tenant, budget.id);
          if (stored && stored.runs >= budget.limit) return budget;
          // Not opened yet (a new minute), or pruned under a chain older than the retention period.
          if (!stored) await this.openBudget(tenant, budget.id, budget.expiresAt);
        }
      }
      return budgets[0];
    },
  },
};
