import { describeJsonFault, findJsonFault } from "../../shared/api/json-limits";
import type { RunWorkflowStep } from "../../shared/api/wire";
import { boundedOutput, outputsBytes } from "./outputs";
import { MAX_NESTING } from "./child-limits";
import type { RunDoc } from "./run-doc";
import { iso, PARKED, put, TERMINAL, written, type Clock, type RunWrite } from "./run-write.logic";
import { advance, fail, newRun } from "./runs.logic";
import type { WorkflowDoc } from "./workflows.logic";

/**
 * Child runs (docs/workflows/README.md#run_workflow): a run started by a step of another run, its
 * parent, as a run of its own. The transitions of the parent's step here are pure; the engine's
 * child-runs.ts does the reads and the insert between them.
 *
 * A child is stored under a key made of its parent, the step, its index there and the parent's
 * attempt (`trigger_key`, unique, as an event-started run's): a parent whose drive is cut between
 * storing the child and recording it finds the child by that key when it is driven again, and never
 * starts a second one.
 */

/** The key a child is stored under: one child per parent, step, index and attempt of the parent. */
export const childKey = (parent: RunDoc, stepId: string, index: number): string =>
  `parent/${parent.id}/${stepId}/${index}/${parent.attempt ?? 1}`;

/**
 * The budget that counts the runs descending from `rootId` (under the root's id, as an event chain's
 * is under its root event's), against RUN_DESCENDANTS_MAX (shared/config.ts: at most 10,000).
 */
export const descendantsBudgetId = (rootId: string): string => `descendants/${rootId}`;

/** Why a new child of `parent` would be too deep, or null. */
export function nestingFault(parent: RunDoc): string | null {
  const depth = (parent.depth ?? 0) + 1;
  return depth > MAX_NESTING
    ? `limit reached: child runs nest at most ${MAX_NESTING} levels deep (MAX_NESTING); this run is ${parent.depth ?? 0} levels under its root`
    : null;
}

/** The child run of `parent`'s current step (a run_workflow step), of `workflow` with `input`, queued and due now. */
export function childOf(workflow: WorkflowDoc, parent: RunDoc, input: Record<string, unknown>, nowMs: number): RunDoc {
  const step = parent.definition[parent.cursor] as RunWorkflowStep;
  return {
    ...newRun(workflow, input, { type: "parent" }, nowMs),
    parent: { run_id: parent.id, step_id: step.id, index: 0 },
    trigger_key: childKey(parent, step.id, 0),
    root_run_id: parent.root_run_id ?? parent.id,
    depth: (parent.depth ?? 0) + 1,
    ...(step.wait && { wakes_parent_at: parent.cursor }),
    ...(parent.request_id !== undefined && { request_id: parent.request_id }),
    ...(parent.traceparent !== undefined && { traceparent: parent.traceparent }),
  };
}

/** The child is stored (just now, or by an earlier drive): the step gives its id at once, or waits for it to end. */
export function childStarted(run: RunDoc, child: RunDoc, c: Clock): RunWrite {
  const step = run.definition[run.cursor] as RunWorkflowStep;
  const started = { started_at: run.steps[run.cursor].started_at ?? iso(c.now), attempt_count: 1 };
  if (!step.wait) return advance(run, { ...started, output: { run_id: child.id } }, c);
  if (TERMINAL.has(child.status)) return childEnded(run, child, c);
  // No due time but the step's time-out: the child's end makes the parent due (child-runs.ts `ended`), on whatever node.
  const timeout = run.steps[run.cursor].timeout_at ?? (step.timeout_ms !== undefined ? iso(c.now + step.timeout_ms) : undefined);
  const steps = put(run, { ...started, status: "waiting", output: { run_id: child.id }, ...(timeout && { timeout_at: timeout }) });
  return written(run, { status: "waiting", steps }, PARKED, c.now, true);
}

/** The child has ended: the step succeeds with its output, or fails as the child did (`on_error` decides). */
export function childEnded(run: RunDoc, child: RunDoc, c: Clock): RunWrite {
  // The time-out goes with the wait: a retry of the run waits afresh.
  const started = { started_at: run.steps[run.cursor].started_at ?? iso(c.now), attempt_count: 1, timeout_at: null };
  if (child.status === "succeeded") {
    const result = { run_id: child.id, status: child.status, output: child.output ?? null };
    return advance(run, { ...started, output: boundedOutput(result, outputsBytes(run.steps, run.cursor)) }, c);
  }
  const output = { run_id: child.id, status: child.status, output: null };
  if (child.status === "cancelled")
    return fail(run, `the child run ${child.id} was cancelled`, c, { ...started, output }, "child_cancelled");
  const step = child.steps.findLast((s) => s.status === "failed");
  const why = step ? ` at its step '${step.id}': ${step.error ?? "failed"}` : child.error ? `: ${child.error.message}` : "";
  return fail(run, `the child run ${child.id} failed${why}`, c, { ...started, output }, "child_failed");
}

/** The most a child's input may take as JSON, as a run's input through the API. */
export const CHILD_INPUT_MAX_BYTES = 64 * 1024;

/**
 * Why a child's input, once its templates are filled, cannot be one (or null): it is held to what
 * POST /workflows/{id}/runs accepts as `input`, an object at level 2 of the body.
 */
export function childInputFault(input: unknown): string | null {
  if (input === null || typeof input !== "object" || Array.isArray(input)) return "the child's input must be an object";
  if (Buffer.byteLength(JSON.stringify(input)) > CHILD_INPUT_MAX_BYTES)
    return `the child's input, once its templates are filled, is over ${CHILD_INPUT_MAX_BYTES} bytes as JSON`;
  const fault = findJsonFault(input, { level: 2 });
  return fault && `the child's input, once its templates are filled, is ${describeJsonFault(fault, "input")}`;
}

/** Whether the step's time-out has passed while it waits for its child. */
export function pastTimeout(run: RunDoc, c: Clock): boolean {
  const at = run.steps[run.cursor].timeout_at;
  return run.steps[run.cursor].status === "waiting" && typeof at === "string" && Date.parse(at) <= c.now;
}

/** The child did not end within the step's timeout_ms (it is cancelled): the step fails with `timed_out`. */
export function childTimedOut(run: RunDoc, child: RunDoc, c: Clock): RunWrite {
  const step = run.definition[run.cursor] as RunWorkflowStep;
  const output = { run_id: child.id, status: "cancelled", output: null };
  const why = `the child run ${child.id} did not end within the step's timeout_ms (${step.timeout_ms ?? "?"} ms); it is cancelled`;
  return fail(run, why, c, { output, timeout_at: null }, "timed_out");
}

/** The step cannot start its child (`why`, with the limit or the workflow named): it fails, with `code`. */
export function childRefused(run: RunDoc, why: string, c: Clock, code = "step_failed"): RunWrite {
  return fail(run, why, c, { started_at: run.steps[run.cursor].started_at ?? iso(c.now), attempt_count: 1 }, code);
}

/** The environment's run starts per minute are spent: the step starts its child when the next minute begins. */
export function childDeferred(run: RunDoc, c: Clock, at: number): RunWrite {
  return written(run, {}, { kind: "due", at }, c.now, true);
}

/** Whether a run that ended may have children to cancel: it failed or was cancelled, and has a step that starts them. */
export const mayHaveChildren = (run: RunDoc): boolean =>
  (run.status === "failed" || run.status === "cancelled") &&
  run.definition.some((s) => s.type === "run_workflow" || s.type === "map" || s.type === "parallel");
