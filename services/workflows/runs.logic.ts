import { newId } from "../../shared/ids";
import { describeJsonFault, findJsonFault } from "../../shared/api/json-limits";
import { errorOf } from "./templates";
import { runOutput } from "./run-output.logic";
import { held } from "./flow-control.logic";
import type { OutboxEvent, RunDoc } from "./run-doc";
import { iso, keep, put, written, type Clock, type RunWrite } from "./run-write.logic";
import type { WorkflowDoc } from "./workflows.logic";
import type { ApprovalDecision, RunStatus, RunStep, RunTrigger, StepStatus } from "../../shared/api/wire";

/**
 * Runs (contract section 6) as a state machine over a stored document. Every transition (start,
 * advance, wait, approve, reject, cancel, retry, finish) is a pure function from a run, what
 * happened and the time to one write: the fields it sets and removes (revision, due time and lease
 * among them) and the events it queues. The engine (engine.ts) executes them: it claims runs, does
 * the steps' work and stores each write under its lease (compare-and-set on `lease` and `rev`); the
 * API's approve, reject and cancel store theirs under the revision they read (`rev`). Events the
 * run must publish go into its `outbox` in the same write, each with its id chosen then, so
 * publishing them again after a crash stores nothing twice.
 *
 * This file holds a run's start and the core transitions (advance, wait, fail, skip, finish); the
 * others are by concern: run-write.logic.ts (one write and how the engine holds the run after it),
 * step-kinds.logic.ts (what each kind of step does), http-step.logic.ts (an http step's request
 * and its attempts), run-moves.logic.ts (the engine's moves: claim, next move, time limits,
 * publish, hand back, give up), run-decisions.logic.ts (cancel, approve, reject, retry and rerun
 * through the API) and run-view.logic.ts (the run as the API shows it).
 */

/** Event-started runs in a row (a run's event starting another workflow's run, …) before the chain stops. */
export const MAX_CHAIN_DEPTH = 10;

/** Start: a new run of `workflow`, queued and due now, its steps kept as they are now (the workflow may change meanwhile). */
export function newRun(
  workflow: WorkflowDoc,
  input: Record<string, unknown>,
  trigger: RunTrigger,
  nowMs: number,
  chainDepth = 0,
  chainRoot?: string,
  rerunOf: string | null = null,
): RunDoc {
  const at = new Date(nowMs).toISOString();
  // Held behind its workflow's flow control, if it has one (flow-control.logic.ts).
  return held(
    {
      id: newId("run"),
      org_id: workflow.org_id,
      environment: workflow.environment,
      workflow_id: workflow.id,
      workflow_version: workflow.version,
      status: "queued",
      input,
      steps: workflow.steps.map((s) => ({
        id: s.id,
        type: s.type,
        status: "pending",
        output: null,
        error: null,
        attempt_count: 0,
        started_at: null,
        finished_at: null,
      })),
      trigger,
      attempt: 1,
      rerun_of: rerunOf,
      pending_approval: null,
      created_at: at,
      updated_at: at,
      finished_at: null,
      definition: workflow.steps,
      cursor: 0,
      rev: 0,
      due_at: nowMs,
      outbox: [],
      ...(trigger.type === "event" && { trigger_key: `${workflow.id}/${trigger.event_id}` }),
      ...(chainDepth > 0 && { chain_depth: chainDepth }),
      ...(chainRoot !== undefined && { chain_root: chainRoot }),
      ...(workflow.timeout_ms && { deadline_at: nowMs + workflow.timeout_ms, timeout_ms: workflow.timeout_ms }),
      ...(workflow.cancel_on && workflow.cancel_on.length > 0 && { cancel_on: workflow.cancel_on }),
      ...(workflow.output !== undefined && { output_template: workflow.output }),
    },
    workflow,
    nowMs,
  );
}

/** The decided approval steps of a run, as its workflow.completed tells them. */
const approvalsOf = (steps: RunStep[]): (ApprovalDecision & { step_id: string })[] =>
  steps.flatMap((s) => (s.decision ? [{ step_id: s.id, ...s.decision }] : []));

/** The step a failed run failed at (the last that failed), with its error; null for a run that did not fail. */
const failedStepOf = (steps: RunStep[], status: RunStatus) => {
  if (status !== "failed") return null;
  const step = steps.findLast((s) => s.status === "failed");
  return step ? { id: step.id, error: errorOf(step) } : null;
};

/**
 * `workflow.completed`, with the run's terminal status (the spec's fields), its attempt, the run it
 * reruns, its approval decisions, the step it failed at and the message of the stop step that ended
 * it, and, when cancelled through the API, by whom and why.
 */
export const completedEvent = (
  run: Pick<RunDoc, "workflow_id" | "id" | "steps"> &
    Partial<Pick<RunDoc, "attempt" | "rerun_of" | "cancelled_by" | "cancel_reason" | "stop_message">>,
  status: RunStatus,
): OutboxEvent => ({
  id: newId("evt"),
  type: "workflow.completed",
  data: {
    workflow_id: run.workflow_id,
    run_id: run.id,
    status,
    attempt: run.attempt ?? 1,
    rerun_of: run.rerun_of ?? null,
    approvals: approvalsOf(run.steps),
    failed_step: failedStepOf(run.steps, status),
    stop_message: run.stop_message ?? null,
    ...((run.cancelled_by || run.cancel_reason) && {
      cancelled_by: run.cancelled_by ?? null,
      cancel_reason: run.cancel_reason ?? "requested",
    }),
  },
});

/**
 * The run ended (`failed` or `cancelled` at the current step, or `succeeded`): the current step
 * takes `stepStatus`, the steps after it are skipped, and `workflow.completed` is queued.
 */
export function finish(
  run: RunDoc,
  status: "succeeded" | "failed" | "cancelled",
  at: string,
  stepStatus?: StepStatus,
  error?: string,
  code?: string,
): Partial<RunDoc> {
  const steps = run.steps.map((s, i) => {
    if (i === run.cursor && stepStatus)
      return {
        ...s,
        status: stepStatus,
        error: error ?? s.error,
        ...((code ?? (stepStatus === "failed" && error !== undefined)) && { error_code: code ?? "step_failed" }),
        finished_at: at,
        started_at: s.started_at ?? at,
      };
    if (i >= run.cursor && (s.status === "pending" || s.status === "running" || s.status === "waiting"))
      return { ...s, status: "skipped" as const };
    return s;
  });
  // A run that succeeds has its output; one whose workflow's output cannot be filled fails, saying why.
  const result = status === "succeeded" ? runOutput({ ...run, steps }) : null;
  const ended = result && "error" in result ? "failed" : status;
  return {
    status: ended,
    steps,
    finished_at: at,
    pending_approval: null,
    ...result,
    outbox: [...run.outbox, completedEvent({ ...run, steps }, ended)],
  };
}

/**
 * Why an event's data (an emit step's, once filled) cannot be published, or null: it is held to what
 * POST /events accepts, where `data` is level 2 of the body. Templates can put deep values into it,
 * and without this an event-started chain of runs could nest its data deeper with every link.
 */
export function eventDataFault(data: unknown): string | null {
  const fault = findJsonFault(data, { level: 2 });
  return fault && `the event's data, once its templates are filled, is ${describeJsonFault(fault, "data")}`;
}

/** The change, and the run's end with it when it moves past the last step. */
function ending(run: RunDoc, change: Partial<RunDoc>, at: string): Partial<RunDoc> {
  if (change.cursor === undefined || change.cursor < run.definition.length) return change;
  return { ...change, ...finish({ ...run, ...change }, "succeeded", at) };
}

/** Advance: the current step succeeded (`patch`: its output, …); the run goes on to the next step, or ends `succeeded` after the last. */
export function advance(run: RunDoc, patch: Partial<RunStep>, c: Clock, event?: OutboxEvent): RunWrite {
  const at = iso(c.now);
  const change: Partial<RunDoc> = {
    status: "running",
    cursor: run.cursor + 1,
    steps: put(run, { status: "succeeded", finished_at: at, ...patch }),
    ...(event && { outbox: [...run.outbox, event] }),
  };
  return written(run, ending(run, change, at), keep(c), c.now, true);
}

/**
 * Wait: the current step waits until `until` (a delay), or for a person with `until` null (an
 * approval, `event` its approval.requested: the engine keeps the run until the event is published,
 * then parks it).
 */
export function wait(
  run: RunDoc,
  c: Clock,
  until: number | null,
  event?: OutboxEvent,
  approval?: { message: string | null; timeoutMs?: number },
): RunWrite {
  const at = iso(c.now);
  const timeout = approval?.timeoutMs !== undefined && { timeout_at: iso(c.now + approval.timeoutMs) };
  const change: Partial<RunDoc> = {
    status: "waiting",
    steps: put(run, { status: "waiting", started_at: at, ...(approval && { message: approval.message, decision: null }), ...timeout }),
    ...(approval && { pending_approval: { step_id: run.steps[run.cursor].id, message: approval.message, requested_at: at } }),
    ...(event && { outbox: [...run.outbox, event] }),
  };
  return written(run, change, until === null ? keep(c) : { kind: "due", at: until }, c.now, true);
}

/**
 * Fail: the current step fails for good with `error` (`patch`: what it leaves, `code` the kind of
 * failure); the run ends `failed`, or with `on_error: continue` goes on to the next step.
 */
export function fail(run: RunDoc, error: string, c: Clock, patch: Partial<RunStep> = {}, code = "step_failed"): RunWrite {
  if (run.definition[run.cursor]?.on_error === "continue") {
    const started_at = run.steps[run.cursor].started_at ?? iso(c.now);
    return advance(run, { ...patch, status: "failed", error, error_code: code, started_at }, c);
  }
  const failed = { ...run, steps: put(run, patch) };
  return written(run, finish(failed, "failed", iso(c.now), "failed", error, code), keep(c), c.now, true);
}

/** Skip: the current step's `if` was false; it is `skipped` (output null) and the run goes on. */
export function skip(run: RunDoc, c: Clock): RunWrite {
  return advance(run, { status: "skipped", output: null, error: null }, c);
}
