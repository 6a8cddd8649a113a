import type { Collection, ReadView, Tenant } from "../../shared/storage/types";
import type { RunDoc } from "./run-doc";
import type { WorkflowDoc } from "./workflows.logic";

/** What child runs (child-runs.ts) and fan-out steps (fan-out.ts) are given by the runs mixin. */
/** A count of runs started against a limit (run-starts.mixin.ts). */
export interface Budget {
  id: string;
  limit: number;
  expiresAt: number;
}

export interface ChildRunsOptions {
  runs: Collection<RunDoc>;
  workflows: ReadView<WorkflowDoc>;
  /** The environment's budget of run starts for the minute `now` falls in (RUN_STARTS_PER_MINUTE). */
  startsBudget: (tenant: Required<Tenant>, now: number) => Budget;
  /** The clock the start budgets count by (the platform's: a test's own in tests). */
  now: () => number;
  /** Stores a run counted against each budget, all or none; null, or the budget that is spent (run-starts.mixin.ts). */
  startCounted: (tenant: Required<Tenant>, budgets: Budget[], run: RunDoc) => Promise<Budget | null>;
  /** Runs that may descend from one root run, and how long their budget is kept. */
  descendantsMax: number;
  budgetTtlMs: number;
  /** A run is due now: a node's engine takes it (engine.ts `wake`, or the broker's RUN_DUE). */
  wake: (id: string, tenant: Required<Tenant>) => void;
}
