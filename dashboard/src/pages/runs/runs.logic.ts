import type { BulkJob, BulkJobFilter, Run } from "../../../../shared/api/wire";

type QueuedReason = NonNullable<Run["queued_reason"]>;

/** Why a queued run waits, in words (docs/workflows/README.md, flow control). */
export const QUEUED_REASONS: Record<QueuedReason, string> = {
  concurrency: "its key's concurrency limit is reached: it starts when a run of the key ends",
  throttle: "its key's throttle is spent for this window: it starts in a later window",
  debounce: "debounced: it starts once starts of its key pause for the debounce period",
  start_budget: "the environment's runs per minute are spent: it starts in a minute with room",
};

/** Why a run waits, or null when it does not wait behind a limit. */
export function waitText(run: Pick<Run, "status" | "queued_reason">): string | null {
  if (run.status !== "queued") return null;
  return run.queued_reason ? QUEUED_REASONS[run.queued_reason] : "about to start";
}

/** A bulk job's filter in a line: `workflow wf_1 · failed · failed at step pay · from … before …`. */
export function bulkFilterText(filter: BulkJobFilter): string {
  const parts = [
    filter.workflow_id && `workflow ${filter.workflow_id}`,
    filter.status,
    filter.failed_step && `failed at step ${filter.failed_step}`,
    filter.created_after && `from ${filter.created_after}`,
    filter.created_before && `before ${filter.created_before}`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(" · ") : "every run";
}

/**
 * How far a job has come: the runs handled (done or failed) out of those in its range when it
 * started (`total`, a bound: runs of other statuses are in it too), and a line saying so.
 */
export function bulkProgress(job: Pick<BulkJob, "status" | "total" | "total_capped" | "matched" | "done" | "failed">): {
  value: number;
  max: number;
  text: string;
} {
  const handled = job.done + job.failed;
  const max = Math.max(job.total, handled, 1);
  const value = job.status === "succeeded" ? max : handled;
  const of = job.total_capped ? `${job.total}+` : String(job.total);
  return {
    value,
    max,
    text: `${job.matched} matched of ${of} in range · ${job.done} done · ${job.failed} failed`,
  };
}
