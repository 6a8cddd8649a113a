import { ApiError } from "../../shared/errors";
import { newId } from "../../shared/ids";
import type { OutboxEvent, RunDoc } from "./run-doc";
import { iso, put, TERMINAL, written, type RunWrite } from "./run-write.logic";
import { finish, newRun } from "./runs.logic";
import type { WorkflowDoc } from "./workflows.logic";
import type { Actor, ApprovalDecision } from "../../shared/api/wire";

// Decisions through the API: each a compare-and-set on the run's revision that takes the engine's
// claim with it (a node still in a step of a cancelled run stops at its next write) and makes the
// run due now, for the engine to go on from.

const decided = (run: RunDoc, change: Partial<RunDoc>, now: number): RunWrite => written(run, change, { kind: "due", at: now }, now, false);

/** Who decides through the API, and what they say (approve and reject: an optional comment). */
export interface Decider {
  by: Actor;
  comment?: string | null;
}

/**
 * Cancel: the run ends `cancelled` at its current step; a run that has ended is a conflict. `by`
 * is kept on the run and in its workflow.completed, with why: asked for, its workflow deleted, or
 * (a child run) its parent ended failed or cancelled.
 */
export function cancel(run: RunDoc, now: number, d?: Decider, reason: NonNullable<RunDoc["cancel_reason"]> = "requested"): RunWrite {
  if (TERMINAL.has(run.status)) throw new ApiError("invalid_state", `The run has ended (${run.status})`, { param: "run_id" });
  // A child cancelled because its parent ended has no key behind it, only the reason.
  const by = d || reason === "parent_ended" ? { cancelled_by: d?.by ?? null, cancel_reason: reason } : {};
  return decided(run, { ...by, ...finish({ ...run, ...by }, "cancelled", iso(now), "cancelled") }, now);
}

function checkWaitsForApproval(run: RunDoc): void {
  const waiting =
    run.status === "waiting" && run.definition[run.cursor]?.type === "approval" && run.steps[run.cursor]?.status === "waiting";
  if (!waiting) throw new ApiError("invalid_state", `The run is not waiting for approval (${run.status})`, { param: "run_id" });
}

/** The decision on the current (approval) step and its approval.decided event. */
function decisionOf(run: RunDoc, decision: ApprovalDecision["decision"], d: Decider, now: number) {
  const made: ApprovalDecision = { decision, comment: d.comment ?? null, decided_by: d.by, decided_at: iso(now) };
  const event: OutboxEvent = {
    id: newId("evt"),
    type: "approval.decided",
    data: { workflow_id: run.workflow_id, run_id: run.id, step_id: run.steps[run.cursor].id, ...made },
  };
  return { made, outbox: [...run.outbox, event] };
}

/** Approve: the approval step succeeds and the run goes on (the engine ends it if that was the last step). */
export function approve(run: RunDoc, now: number, d: Decider): RunWrite {
  checkWaitsForApproval(run);
  const { made, outbox } = decisionOf(run, "approved", d, now);
  const steps = put(run, { status: "succeeded", output: { approved: true }, decision: made, finished_at: iso(now) });
  return decided(run, { status: "running", cursor: run.cursor + 1, steps, pending_approval: null, outbox }, now);
}

/** Reject: the approval step fails with "rejected", and the run with it. */
export function reject(run: RunDoc, now: number, d: Decider): RunWrite {
  checkWaitsForApproval(run);
  const { made, outbox } = decisionOf(run, "rejected", d, now);
  const rejected = { ...run, outbox, steps: put(run, { output: { approved: false }, decision: made }) };
  if (run.definition[run.cursor]?.on_error === "continue") {
    const steps = put(rejected, { status: "failed", error: "rejected", error_code: "rejected", finished_at: iso(now) });
    return decided(run, { status: "running", cursor: run.cursor + 1, steps, pending_approval: null, outbox }, now);
  }
  return decided(run, finish(rejected, "failed", iso(now), "failed", "rejected", "rejected"), now);
}

/** How many times one run may be retried (its `attempt` is at most one more). */
export const MAX_RUN_RETRIES = 20;

/**
 * Retry: a failed run goes on from the step that failed, as the same run (its `attempt` one more)
 * with the definition it started with. The failed step starts over (its attempts counted afresh)
 * and the steps skipped after it are pending again; what succeeded before it stands. A run failed
 * by a rejection is a person's decision, not a fault: it is refused (rerun it to ask again).
 */
export function retry(run: RunDoc, now: number): RunWrite {
  if (run.status !== "failed")
    throw new ApiError("invalid_state", `Only a failed run can be retried (it is ${run.status})`, { param: "run_id" });
  // The step the run ended at: earlier ones may have failed under `on_error: continue`.
  const at = run.steps.findLastIndex((s) => s.status === "failed");
  if (at < 0) throw new ApiError("invalid_state", "The run has no failed step to go on from", { param: "run_id" });
  if (run.steps[at].decision?.decision === "rejected")
    throw new ApiError("invalid_state", "The run was rejected at an approval step: a decision is not retried; rerun it to ask again", {
      param: "run_id",
    });
  const attempt = (run.attempt ?? 1) + 1;
  if (attempt > MAX_RUN_RETRIES + 1)
    throw new ApiError("invalid_state", `The run was retried ${MAX_RUN_RETRIES} times already; rerun it`, { param: "run_id" });
  const fresh = {
    status: "pending" as const,
    output: null,
    error: null,
    attempt_count: 0,
    started_at: null,
    finished_at: null,
    timeout_at: null,
    waiting_for: null,
  };
  const steps = run.steps.map((s, i) => (i === at || (i > at && s.status === "skipped") ? { ...s, ...fresh } : s));
  return written(
    run,
    {
      status: "queued",
      attempt,
      cursor: at,
      steps,
      finished_at: null,
      stop_message: null,
      // Its cancel_on is registered again, as this attempt's.
      ...(run.cancel_armed && { cancel_armed: false }),
      // A retried run has its whole time limit again.
      ...(run.timeout_ms !== undefined && { deadline_at: now + run.timeout_ms }),
    },
    { kind: "due", at: now },
    now,
    true,
  );
}

/** Rerun: a new run of `workflow` as it is now (its current version), with `old`'s input, linked to it; `old` must have ended. */
export function rerun(workflow: WorkflowDoc, old: RunDoc, now: number): RunDoc {
  if (!TERMINAL.has(old.status))
    throw new ApiError("invalid_state", `Only a run that has ended can be rerun (it is ${old.status})`, { param: "run_id" });
  return newRun(workflow, old.input, { type: "manual" }, now, 0, undefined, old.id);
}
