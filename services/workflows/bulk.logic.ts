import { ApiError, echo } from "../../shared/errors";
import { idFloorAt, isId } from "../../shared/ids";
import { instantOf } from "../../shared/api/pagination";
import { collectionSpec, type Filter } from "../../shared/storage/types";
import type { BulkAction, BulkJob, BulkJobFilter, RunStatus } from "../../shared/api/wire";
import type { RunDoc } from "./run-doc";

/**
 * Bulk operations on runs (POST /runs/bulk): a filter over one environment's runs and an action
 * (retry, rerun or cancel) taken on each run it picks, by a stored job that walks the runs in id
 * order along an index, a batch at a time (bulk.mixin.ts). This file holds the pure part: which
 * filters are accepted, which runs an action applies to, and the job as the API shows it.
 */

/** Runs a job reads per batch (along the index: a bounded read), and its pause between batches. */
export const BULK_BATCH = 50;
export const BULK_PAUSE_MS = 250;
/** A node holding a job's batch this long without finishing it (killed) leaves it to another. */
export const BULK_LEASE_MS = 10_000;

/** A bulk job as stored: the view and the fields that drive it. */
export interface BulkJobDoc extends Omit<BulkJob, "object"> {
  org_id: string;
  /** `<org>/<environment>` while the job runs: one running job per environment (a unique, sparse index). */
  running?: string;
  /** The last run id handled; the next batch reads after it (from it, inclusive, before the first batch). */
  cursor: string;
  started?: true;
  /** The runs of the batch under way, picked and not yet acted on; stored before the first is acted on, so a node killed mid-batch leaves them to the next. */
  batch?: string[];
  /** Where the cursor goes once `batch` is done, and whether it was the last. */
  batch_end?: string;
  batch_last?: true;
  /** The first run id past the range: runs made after the job started (its own reruns among them) are not picked. */
  end: string;
  due_at?: number;
  lease?: string;
}

export const BULK_JOBS = collectionSpec<BulkJobDoc>("workflow_bulk_jobs", [
  { fields: { running: 1 }, unique: true, sparse: true },
  { fields: { due_at: 1 }, sparse: true },
  { fields: { org_id: 1, environment: 1, id: 1 } },
  // Jobs that ended, by when: pruned after EVENT_RETENTION_DAYS.
  { fields: { finished_at: 1 }, sparse: true },
]);

export const bulkView = ({
  org_id: _o,
  running: _r,
  cursor: _c,
  started: _s,
  end: _e,
  due_at: _d,
  lease: _l,
  batch: _b,
  batch_end: _be,
  batch_last: _bl,
  ...view
}: BulkJobDoc): BulkJob => ({
  object: "bulk_job",
  ...view,
});

/** The statuses of the runs each action applies to. */
const APPLIES: Record<BulkAction, ReadonlySet<RunStatus>> = {
  retry: new Set(["failed"]),
  rerun: new Set(["succeeded", "failed", "cancelled"]),
  cancel: new Set(["queued", "running", "waiting"]),
};

/**
 * The filter as stored, with its times as ISO strings, or a 400 naming the field: a workflow_id
 * that is not a workflow's id, a status the
 * action does not apply to, a failed_step with an action other than retry or rerun, or a filter
 * with neither a workflow nor a time range (refused rather than walking every run of the
 * environment by accident).
 */
export function checkFilter(action: BulkAction, filter: BulkJobFilter): BulkJobFilter {
  const { workflow_id, status, created_after, created_before, failed_step } = filter;
  if (status && !APPLIES[action].has(status))
    throw new ApiError("parameter_invalid", `${action} applies to runs ${[...APPLIES[action]].join(", ")}, not ${status}`, {
      param: "filter.status",
    });
  if (failed_step !== undefined && (action === "cancel" || (status !== undefined && status !== "failed")))
    throw new ApiError("parameter_invalid", "failed_step picks failed runs: it goes with retry or rerun, and status failed or none", {
      param: "filter.failed_step",
    });
  // Stored and answered as the job's filter, which the API reference says is a workflow's id.
  if (workflow_id !== undefined && !isId("wf", workflow_id))
    throw new ApiError("parameter_invalid", `filter.workflow_id must be a workflow's id (wf_…); received ${echo(workflow_id)}`, {
      param: "filter.workflow_id",
    });
  if (!workflow_id && created_after === undefined && created_before === undefined)
    throw new ApiError("parameter_invalid", "A bulk filter needs a workflow_id or a creation time range (created_after, created_before)", {
      param: "filter",
    });
  const after = created_after === undefined ? undefined : instantOf("filter.created_after", created_after);
  const before = created_before === undefined ? undefined : instantOf("filter.created_before", created_before);
  if (after !== undefined && before !== undefined && after >= before)
    throw new ApiError("parameter_invalid", "created_after must be before created_before", { param: "filter.created_before" });
  return {
    ...(workflow_id && { workflow_id }),
    ...(status && { status }),
    ...(after !== undefined && { created_after: new Date(after).toISOString() }),
    ...(before !== undefined && { created_before: new Date(before).toISOString() }),
    ...(failed_step !== undefined && { failed_step }),
  };
}

/** Where a job's walk starts and ends (run ids), the end no later than the job's start at `now`. */
export function rangeOf(filter: BulkJobFilter, now: number): { cursor: string; end: string } {
  const before = filter.created_before === undefined ? now + 1 : Math.min(Date.parse(filter.created_before), now + 1);
  return {
    cursor: idFloorAt("run", filter.created_after === undefined ? 0 : Date.parse(filter.created_after)),
    end: idFloorAt("run", before),
  };
}

/**
 * The store filter of a job's runs: along (workflow_id?, status?, id), with the status the action
 * implies when there is one. A batch's read leaves out the range's end (`withEnd` false) and stops
 * at it in memory (`pastEnd`): with both bounds on `id`, SQLite prefers the index without the
 * status and walks every run of the workflow to find the few of that status.
 */
export function batchFilter(job: Pick<BulkJobDoc, "action" | "filter" | "cursor" | "started" | "end">, withEnd = true): Filter {
  const { workflow_id, status, failed_step } = job.filter;
  const only = status ?? (job.action === "retry" || failed_step !== undefined ? "failed" : undefined);
  return {
    ...(workflow_id && { workflow_id }),
    ...(only && { status: only }),
    id: { [job.started ? "$gt" : "$gte"]: job.cursor, ...(withEnd && { $lt: job.end }) },
  };
}

/** Whether a run read by a batch is past the job's range (made after the job started, or at created_before). */
export const pastEnd = (job: Pick<BulkJobDoc, "end">, run: Pick<RunDoc, "id">): boolean => run.id >= job.end;

/** Whether the job's action applies to `run`, read by its batch: its status, and the step it failed at. */
export function picks(job: Pick<BulkJobDoc, "action" | "filter">, run: Pick<RunDoc, "status" | "steps">): boolean {
  if (!APPLIES[job.action].has(run.status)) return false;
  if (job.filter.failed_step === undefined) return true;
  return run.status === "failed" && run.steps.findLast((s) => s.status === "failed")?.id === job.filter.failed_step;
}
