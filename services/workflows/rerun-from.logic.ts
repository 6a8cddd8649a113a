import { ApiError } from "../../shared/errors";
import type { RunDoc } from "./run-doc";
import { TERMINAL } from "./run-write.logic";
import { newRun } from "./runs.logic";
import type { WorkflowDoc } from "./workflows.logic";

/** What POST …/rerun may say: the step to start from (earlier ones copied) and a new input. */
export interface RerunOptions {
  fromStep?: string;
  input?: Record<string, unknown>;
}

/** Statuses of an earlier step whose result a rerun from a later step can stand on. */
const COPYABLE = new Set(["succeeded", "skipped"]);

/**
 * Rerun: a new run of `workflow` as it is now (its current version), linked to `old`, which must
 * have ended; with `input` (default: `old`'s). With `fromStep`, the steps before it are not run
 * again: each takes `old`'s result for the step of the same id, marked `copied_from`, and the run
 * starts at `fromStep`. Each of those steps must have succeeded (or been skipped) in `old`: a
 * result it never had cannot be copied.
 */
export function rerunFrom(workflow: WorkflowDoc, old: RunDoc, now: number, options: RerunOptions = {}): RunDoc {
  if (!TERMINAL.has(old.status))
    throw new ApiError("invalid_state", `Only a run that has ended can be rerun (it is ${old.status})`, { param: "run_id" });
  const run = newRun(workflow, options.input ?? old.input, { type: "manual" }, now, 0, undefined, old.id);
  if (options.fromStep === undefined) return run;
  const at = workflow.steps.findIndex((s) => s.id === options.fromStep);
  // The workflow as it is now decides (it may have changed since the run): a conflict with its state.
  if (at < 0) throw new ApiError("invalid_state", `The workflow has no step '${options.fromStep}' (now)`, { param: "from_step" });
  const before = new Map(old.steps.map((s) => [s.id, s]));
  const steps = run.steps.map((step, i) => {
    if (i >= at) return step;
    const was = before.get(step.id);
    if (!was || !COPYABLE.has(was.status) || was.type !== step.type)
      throw new ApiError(
        "invalid_state",
        `Step '${step.id}' before '${options.fromStep}' ${!was ? "did not exist" : was.type !== step.type ? `was a ${was.type} step` : `ended ${was.status}`} in run ${old.id}: rerun from an earlier step`,
        { param: "from_step" },
      );
    return { ...was, copied_from: old.id };
  });
  return { ...run, steps, cursor: at };
}
