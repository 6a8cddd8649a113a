import { quotaCounters } from "../../shared/records/quotas";
import { EVENTS } from "../../shared/records/events";
import { RUN_OUTCOMES } from "../../shared/records/outcomes";
import { RUN_RETENTION_INDEXES, RUNS_COLLECTION } from "../../shared/records/retention";
import { declareStore, type StoreVars } from "../../shared/runtime/store.mixin";
import { collectionSpec, type Doc, type Environment } from "../../shared/storage/types";
import type { RunDoc } from "./run-doc";
import { BULK_JOBS } from "./bulk.logic";
import { HOOK_REQUESTS } from "./hook-requests.logic";
import type { SecretDoc } from "./secrets.logic";
import { WAIT_SHAPES, WAITS } from "./wait-records";
import type { WorkflowDoc, WorkflowVersionDoc } from "./workflows.logic";

/**
 * A count of runs started against a limit: the budget of one chain of event-started runs (under the
 * id of the event that began it), or the runs started in one minute of one environment, however
 * they were started (`starts/<org>/<environment>/<minute>`).
 */
export interface BudgetDoc extends Doc {
  environment: Environment;
  runs: number;
  /** Pruned after this: EVENT_RETENTION_DAYS after a chain's root event, an hour after a minute. */
  expires_at: string;
  /** When a chain's budget first refused a run (its `workflow.chain_limited` is stored then, once). */
  limited_at?: string;
}

/**
 * Workflows, runs, run budgets (of event chains: QUOTAS.runs_per_event_chain, and of starts per
 * minute), run counts and the secrets its http steps use are the workflows service's, with the
 * outbox of its own events; the event log is read (for triggers) and written by the events
 * service. One declaration for the service and its mixins (runs.mixin.ts, triggers.mixin.ts).
 */
export const STORE = declareStore({
  owns: {
    workflows: collectionSpec<WorkflowDoc>("workflows", [
      // One per filter of the list, each ending in `id`: a page is read in order, never sorted.
      { fields: { org_id: 1, environment: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, status: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, "trigger.event_type": 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, "trigger.event_type": 1, status: 1, id: -1 } },
      // Active schedules only, by when a node must look at them (schedules.mixin.ts), across tenants.
      { fields: { "schedule.due_at": 1 }, sparse: true },
      // An inbound request finds its workflow by its hook's id alone (hooks.mixin.ts).
      { fields: { "hook.id": 1 }, unique: true, sparse: true },
    ]),
    // Each version of each workflow's definition (GET /workflows/{id}/versions/{version}); the
    // newest VERSIONS_KEPT of a workflow are kept, and they go with their workflow.
    versions: collectionSpec<WorkflowVersionDoc>("workflow_versions", [
      { fields: { org_id: 1, environment: 1, workflow_id: 1, version: -1 } },
    ]),
    runs: collectionSpec<RunDoc>(RUNS_COLLECTION, [
      // GET /runs across workflows, with or without a status (a creation time range is a range of ids),
      // and a workflow's runs. Ascending, though read newest first (backwards, at no cost): a new run's
      // id goes at the end of its range, which costs each start less than an entry at its head.
      { fields: { org_id: 1, environment: 1, id: 1 } },
      { fields: { org_id: 1, environment: 1, status: 1, id: 1 } },
      { fields: { org_id: 1, environment: 1, workflow_id: 1, id: 1 } },
      { fields: { org_id: 1, environment: 1, workflow_id: 1, status: 1, id: 1 } },
      { fields: { trigger_key: 1 }, unique: true, sparse: true },
      // A run's children (GET /runs?parent_run_id=, and cancelling them with it): child runs only.
      { fields: { "parent.run_id": 1, org_id: 1, environment: 1, id: 1 }, sparse: true },
      // One step's children in item order, each item's newest first (GET /runs?parent_run_id=&step_id=,
      // step-children.ts), and the fan-out's counts and look-ups of a step's children (fan-out.ts).
      { fields: { "parent.run_id": 1, org_id: 1, environment: 1, "parent.step_id": 1, "parent.index": 1, id: -1 }, sparse: true },
      // A map's or parallel's children by status (fan-out.ts): its unfinished and failed ones counted
      // at each drive, reading as many entries as there are such children, not every child.
      { fields: { "parent.run_id": 1, org_id: 1, environment: 1, "parent.step_id": 1, status: 1 }, sparse: true },
      // Only runs the engine has work on carry `due_at`: the index that finds which tenants have
      // work stays small, and holds their tenant fields (read without the documents).
      { fields: { due_at: 1, org_id: 1, environment: 1 }, sparse: true },
      // A tenant's most overdue run, claimed in its turn (tenant-slots.ts); and the tenants with
      // work, one seek each, when the most overdue runs are all of tenants at their share (engine.ts).
      // Only runs with a due time, as above.
      { fields: { org_id: 1, environment: 1, due_at: 1 }, present: "due_at" },
      // Flow control (flow-gate.ts): a key's oldest held run, and its runs let go that have not ended
      // (a bounded count); then the held runs a node's sweep must look at, across tenants.
      { fields: { flow_key: 1, status: 1, held_at: 1 }, sparse: true },
      { fields: { release_at: 1, org_id: 1, environment: 1 }, sparse: true },
      // A debounced key's pending run, one at most (flow-control.logic.ts).
      { fields: { debounce_key: 1 }, unique: true, sparse: true },
      // Runs by status across tenants, for the metrics' bounded counts (unfinished ones only are counted).
      { fields: { status: 1, due_at: 1 } },
      ...RUN_RETENTION_INDEXES,
    ]),
    budgets: collectionSpec<BudgetDoc>("workflow_budgets", [{ fields: { expires_at: 1 } }]),
    outcomes: RUN_OUTCOMES,
    // Encrypted values (secrets.logic.ts): read by name for a step, listed newest first.
    secrets: collectionSpec<SecretDoc>("workflow_secrets", [
      { fields: { org_id: 1, environment: 1, name: 1 }, unique: true },
      { fields: { org_id: 1, environment: 1, id: -1 } },
    ]),
    // Runs waiting for an event or cancelled by one, by key, and the sets of paths their keys use (waits.logic.ts).
    waits: WAITS,
    shapes: WAIT_SHAPES,
    // The workflows of each environment, counted with each creation and deletion (quotas.ts).
    quota: quotaCounters("workflow_quota"),
    // Bulk operations on runs (bulk.mixin.ts).
    bulkJobs: BULK_JOBS,
    // A hook's recent requests, the newest HOOK_REQUESTS_KEPT of each workflow (hook-requests.mixin.ts).
    hookRequests: HOOK_REQUESTS,
  },
  reads: { events: EVENTS },
  outbox: true,
});

export type WorkflowsStoreVars = StoreVars<typeof STORE>;
