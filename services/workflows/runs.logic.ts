import { ApiError } from "../../shared/errors";
import { newId } from "../../shared/ids";
import { describeJsonFault, findJsonFault } from "../../shared/api/json-limits";
import type { Update } from "../../shared/storage/types";
import { boundedOutput, outputsBytes, TemplateError } from "./outputs";
import { attemptCountOf, condition, errorOf, render, scopeOf } from "./templates";
import { ATTEMPTS_KEPT, nextRetry, policyOf, type AttemptFacts } from "./retry.logic";
import type { OutboxEvent, RunDoc } from "./run-doc";
import type { ApprovalStep, HttpStep, Step, WorkflowDoc } from "./workflows.logic";
import {
  FINISHED_RUN_STATUSES,
  type Actor,
  type ApprovalDecision,
  type Run,
  type RunStatus,
  type RunStep,
  type RunTrigger,
  type StepAttempt,
  type StepStatus,
} from "../../shared/api/wire";

/**
 * Runs (contract section 6) as a state machine over a stored document. This file owns every
 * transition (start, advance, wait, approve, reject, cancel, retry, finish) as pure functions from
 * a run, what happened and the time to one write: the fields it sets and removes (revision, due
 * time and lease among them) and the events it queues. The engine (engine.ts) executes them: it
 * claims runs, does the steps' work and stores each write under its lease (compare-and-set on
 * `lease` and `rev`); the API's approve, reject and cancel store theirs under the revision they
 * read (`rev`). Events the run must publish go into its `outbox` in the same write, each with its
 * id chosen then, so publishing them again after a crash stores nothing twice.
 */
export { RUN_STATUSES, type RunStatus, type RunStep, type RunTrigger, type StepStatus } from "../../shared/api/wire";
export const TERMINAL: ReadonlySet<RunStatus> = new Set(FINISHED_RUN_STATUSES);

export type { OutboxEvent, RunDoc } from "./run-doc";

export type RunView = Run;

export const runView = ({
  org_id: _o,
  definition: _d,
  cursor: _c,
  rev: _r,
  due_at: _due,
  lease: _l,
  stalls: _st,
  outbox: _ob,
  trigger_key: _t,
  chain_depth: _cd,
  chain_root: _cr,
  request_id: _rq,
  traceparent: _tp,
  deadline_at: _dl,
  timeout_ms: _tm,
  ...view
}: RunDoc): RunView => ({
  object: "run",
  ...view,
  // Runs stored before these fields existed: their first attempt, no rerun, no pending approval shown.
  attempt: view.attempt ?? 1,
  rerun_of: view.rerun_of ?? null,
  pending_approval: view.pending_approval ?? null,
  stop_message: view.stop_message ?? null,
  // Runs stored before the rename counted a step's tries in `attempts`; it now lists them.
  steps: view.steps.map(({ attempts, ...step }: Omit<RunStep, "attempts"> & { attempts?: number | StepAttempt[] }) => ({
    ...step,
    attempt_count: attemptCountOf({ ...step, attempts }),
    ...(Array.isArray(attempts) && { attempts }),
  })),
});

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
  return {
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
  };
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
    ...(run.cancelled_by && { cancelled_by: run.cancelled_by, cancel_reason: run.cancel_reason ?? "requested" }),
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
  return { status, steps, finished_at: at, pending_approval: null, outbox: [...run.outbox, completedEvent({ ...run, steps }, status)] };
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

// Transitions -------------------------------------------------------------------------------------

/**
 * Claims of a run in a row that ended before any progress of it was stored (the store failed, or
 * the node stopped mid-step) before the engine gives the run up instead of trying it again.
 */
export const MAX_STALLS = 3;

/** What a transition of the engine's needs besides the run: the time, and how long a claim outlives the step it covers. */
export interface Clock {
  now: number;
  leaseMarginMs: number;
}

/** One write of a run: the fields it sets (revision, update time, due time) and removes, and the events it queues in the outbox. */
export interface RunWrite {
  set: Partial<RunDoc>;
  unset: Partial<Record<"lease" | "due_at" | "stalls", true>>;
  events: OutboxEvent[];
  /** The engine's claim goes with the write: the run is no longer the engine's to drive. */
  released: boolean;
}

/**
 * After a write: the engine keeps its claim and goes on (the claim then covers the next step), or
 * lets the run go, due again at `at`, or parked (no due time: it waits for a person, or has ended).
 */
type Hold = { kind: "keep"; marginMs: number } | { kind: "due"; at: number } | { kind: "parked" };

const PARKED: Hold = { kind: "parked" };
const keep = (c: Clock): Hold => ({ kind: "keep", marginMs: c.leaseMarginMs });
const iso = (ms: number): string => new Date(ms).toISOString();
const leaseFor = (step: Step | undefined, marginMs: number): number => (step?.type === "http" ? step.timeout_ms : 0) + marginMs;

/**
 * The write of `change`. Every write bumps `rev`; `progress` (every write but a decision's and the
 * mark of an http attempt before its request) resets the count of claims that stored nothing.
 */
function written(run: RunDoc, change: Partial<RunDoc>, given: Hold, now: number, progress: boolean): RunWrite {
  // A time limit (the run's, a waiting approval's) makes a parked or waiting run due when it falls due.
  const limit = limitOf({ ...run, ...change });
  const hold: Hold =
    limit === null || given.kind === "keep" ? given : { kind: "due", at: given.kind === "due" ? Math.min(given.at, limit) : limit };
  const dueAt =
    hold.kind === "keep"
      ? now + leaseFor(run.definition[change.cursor ?? run.cursor], hold.marginMs)
      : hold.kind === "due"
        ? hold.at
        : null;
  const queued = new Set(run.outbox.map((e) => e.id));
  return {
    set: { ...change, rev: run.rev + 1, updated_at: iso(now), ...(dueAt !== null && { due_at: dueAt }) },
    unset: {
      ...(progress && { stalls: true as const }),
      ...(hold.kind !== "keep" && { lease: true as const }),
      ...(hold.kind === "parked" && { due_at: true as const }),
    },
    events: (change.outbox ?? []).filter((e) => !queued.has(e.id)),
    released: hold.kind !== "keep",
  };
}

/** The earliest time limit of a run that has not ended: its deadline, its waiting approval's timeout; null when none. */
function limitOf(run: RunDoc): number | null {
  if (TERMINAL.has(run.status)) return null;
  const waiting = run.steps[run.cursor];
  const approval = waiting?.status === "waiting" && waiting.timeout_at ? Date.parse(waiting.timeout_at) : null;
  const limits = [run.deadline_at ?? null, approval].filter((t): t is number => t !== null);
  return limits.length > 0 ? Math.min(...limits) : null;
}

/** The store's update for a write. */
export const updateOf = (write: RunWrite): Update => ({
  $set: { ...write.set },
  ...(Object.keys(write.unset).length > 0 && { $unset: { ...write.unset } }),
});

/** A claim of a due run by `lease`: it lasts the margin, and counts as a stall until a write of progress resets it. */
export const claim = (lease: string, c: Clock): Update => ({ $set: { due_at: c.now + c.leaseMarginMs, lease }, $inc: { stalls: 1 } });

/**
 * A new run as it is stored already claimed by `lease` (the node starting it drives it at once):
 * the state `claim` would leave it in, so a node killed before it stores anything more leaves a
 * run that falls due when the claim runs out, as after any claim. When the engine's first write
 * would only show its http step running (nothing to publish, the claim kept), that write is stored
 * with it: the run starts `running`, as the engine would have stored it before the request leaves.
 */
export function claimedAtStart(run: RunDoc, lease: string, c: Clock): RunDoc {
  const claimed = { ...run, due_at: c.now + c.leaseMarginMs, lease, stalls: (run.stalls ?? 0) + 1 };
  const move = nextMove(claimed, c);
  if (move.kind !== "write" || move.write.released || move.write.events.length > 0) return claimed;
  return storedAfter(claimed, move.write);
}

/** The run as the store leaves it after `write`. */
export function storedAfter(run: RunDoc, write: RunWrite): RunDoc {
  const next: Record<string, unknown> = { ...run, ...write.set };
  for (const field of Object.keys(write.unset)) delete next[field];
  return next as unknown as RunDoc;
}

/** The run's steps with the current one changed by `patch`. */
function put(run: RunDoc, patch: Partial<RunStep>): RunStep[] {
  const steps = [...run.steps];
  steps[run.cursor] = { ...steps[run.cursor], ...patch };
  return steps;
}

/** Ended, or waiting for a person: nothing left for the engine but the outbox. */
export function isParked(run: RunDoc): boolean {
  return TERMINAL.has(run.status) || (run.definition[run.cursor]?.type === "approval" && run.steps[run.cursor]?.status === "waiting");
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

export { retryDelay } from "./retry.logic";

/** One attempt of an http step, as the engine made it: the facts a retry policy decides on, and how long it took. */
export interface Attempt extends AttemptFacts {
  ok: boolean;
  output: unknown;
  error: string | null;
  ms?: number;
}

/**
 * An attempt of the current http step ended: advance, retry (due after the policy's wait) while
 * the policy retries it, or fail. The attempt joins the step's newest ATTEMPTS_KEPT.
 */
export function attempted(run: RunDoc, result: Attempt, c: Clock, retryBaseMs: number, random = Math.random): RunWrite {
  const step = run.definition[run.cursor] as HttpStep;
  const state = run.steps[run.cursor];
  // Within the step's and the run's bounds on stored outputs (see outputs.ts).
  const output = boundedOutput(result.output, outputsBytes(run.steps, run.cursor));
  const attempt_count = attemptCountOf(state) + 1;
  const record: StepAttempt = {
    attempt: attempt_count,
    started_at: iso(c.now - (result.ms ?? 0)),
    finished_at: iso(c.now),
    ...(result.status_code !== undefined && { status_code: result.status_code }),
    error: result.error === null ? null : result.error.slice(0, 500),
  };
  const attempts = [...(Array.isArray(state.attempts) ? state.attempts : []), record].slice(-ATTEMPTS_KEPT);
  if (result.ok) return advance(run, { output, error: null, attempt_count, attempts }, c);
  const wait = nextRetry(policyOf(step, retryBaseMs), attempt_count, result, c.now, random);
  if (wait === null) return fail(run, result.error ?? "failed", c, { output, attempt_count, attempts });
  return written(
    run,
    { steps: put(run, { output, error: result.error, attempt_count, attempts }) },
    { kind: "due", at: c.now + wait },
    c.now,
    true,
  );
}

/** An http step's request, its fields filled from the run's input and earlier outputs. */
export interface HttpRequest {
  url: string;
  method: HttpStep["method"];
  headers: Record<string, string>;
  body: string | undefined;
  timeoutMs: number;
}

function requestOf(step: HttpStep, run: RunDoc, secrets: Record<string, string>): HttpRequest {
  const scope = scopeOf(run, secrets);
  const url = String(render(step.url, scope));
  const headers = render(step.headers, scope) as Record<string, string>;
  const rendered = step.body === null ? undefined : render(step.body, scope);
  const body = rendered === undefined || rendered === null ? undefined : typeof rendered === "string" ? rendered : JSON.stringify(rendered);
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
  if (body !== undefined && !lower["content-type"])
    lower["content-type"] = typeof rendered === "string" ? "text/plain" : "application/json";
  lower["user-agent"] ??= "wfp-workflows/1";
  return { url, method: step.method, headers: lower, body, timeoutMs: step.timeout_ms };
}

/**
 * What the engine does next with a run it holds: publish the outbox (then write `published`),
 * make an http attempt (then write `attempted`), or store a write. `secrets`: the values of the
 * `{{secrets.…}}` the current step uses, which the engine reads once a move is a call.
 */
export type Move = { kind: "publish" } | { kind: "call"; request: HttpRequest } | { kind: "write"; write: RunWrite };

export function nextMove(run: RunDoc, c: Clock, secrets: Record<string, string> = {}): Move {
  if (run.outbox.length > 0) return { kind: "publish" };
  const late = timedOut(run, c);
  if (late) return { kind: "write", write: late };
  if (isParked(run)) return { kind: "write", write: written(run, {}, PARKED, c.now, true) };
  try {
    return start(run, c, secrets);
  } catch (err) {
    // A template that cannot be filled (a missing value, a truncated output): the step fails.
    if (!(err instanceof TemplateError)) throw err;
    return { kind: "write", write: fail(run, err.message, c, {}, "template_error") };
  }
}

/**
 * A time limit that has passed: the run's (it fails at its current step with `run_timed_out`), or
 * its waiting approval's (the step fails with `timed_out`, and its on_error decides); else null.
 */
function timedOut(run: RunDoc, c: Clock): RunWrite | null {
  if (TERMINAL.has(run.status)) return null;
  if (run.deadline_at !== undefined && run.deadline_at <= c.now) {
    const at = iso(c.now);
    const why = `the run did not end within its workflow's timeout_ms (${run.timeout_ms ?? "?"} ms)`;
    return written(run, finish(run, "failed", at, "failed", why, "run_timed_out"), keep(c), c.now, true);
  }
  const state = run.steps[run.cursor];
  if (state?.status === "waiting" && state.timeout_at && Date.parse(state.timeout_at) <= c.now) {
    const step = run.definition[run.cursor] as ApprovalStep;
    const write = fail(run, `no decision within the step's timeout_ms (${step.timeout_ms ?? "?"} ms)`, c, {}, "timed_out");
    return { ...write, set: { ...write.set, pending_approval: null } };
  }
  return null;
}

/** The current step, taken one move further. */
function start(run: RunDoc, c: Clock, secrets: Record<string, string>): Move {
  const step = run.definition[run.cursor];
  const write = (w: RunWrite): Move => ({ kind: "write", write: w });
  const at = iso(c.now);
  if (!step) return write(written(run, finish(run, "succeeded", at), keep(c), c.now, true));
  const state = run.steps[run.cursor];
  if (step.if !== undefined && state.status === "pending" && !condition(step.if, scopeOf(run))) return write(skip(run, c));
  switch (step.type) {
    case "delay":
      if (state.status !== "waiting") return write(wait(run, c, c.now + step.duration_ms));
      return write(advance(run, { output: { waited_ms: step.duration_ms } }, c));
    case "approval": {
      const message = step.message === null ? null : render(step.message, scopeOf(run));
      const data = { workflow_id: run.workflow_id, run_id: run.id, step_id: step.id, message };
      const fault = eventDataFault(data);
      if (fault) return write(fail(run, `approval.requested: ${fault}`, c));
      // On the run as text (a template of the whole message may have filled in a value).
      const text = message === null || typeof message === "string" ? message : JSON.stringify(message);
      return write(
        wait(run, c, null, { id: newId("evt"), type: "approval.requested", data }, { message: text, timeoutMs: step.timeout_ms }),
      );
    }
    case "emit": {
      const data = render(step.data, scopeOf(run)) as Record<string, unknown>;
      // A template may have put a deep value into the data: it must be what POST /events takes.
      const fault = eventDataFault(data);
      if (fault) return write(fail(run, fault, c, { attempt_count: 1 }));
      const event: OutboxEvent = { id: newId("evt"), type: step.event_type, data };
      return write(advance(run, { output: { event_id: event.id }, started_at: at, attempt_count: 1 }, c, event));
    }
    case "set": {
      const output = boundedOutput(render(step.output, scopeOf(run)), outputsBytes(run.steps, run.cursor));
      return write(advance(run, { output, started_at: at, attempt_count: 1 }, c));
    }
    case "stop": {
      const rendered = step.message === null ? null : render(step.message, scopeOf(run));
      const message = rendered === null || typeof rendered === "string" ? rendered : JSON.stringify(rendered);
      const stopped = { ...run, stop_message: message, steps: put(run, { output: { status: step.status, message }, attempt_count: 1 }) };
      const end =
        step.status === "succeeded"
          ? finish(stopped, "succeeded", at, "succeeded")
          : finish(stopped, "failed", at, "failed", message ?? "stopped", "stopped");
      return write(written(run, { stop_message: message, ...end }, keep(c), c.now, true));
    }
    case "http":
      if (run.status === "running" && state.status === "running") return { kind: "call", request: requestOf(step, run, secrets) };
      // Shown as running before the request leaves (a crash then repeats the attempt). Not
      // progress: a request whose answer is never stored counts towards MAX_STALLS.
      return write(
        written(
          run,
          { status: "running", steps: put(run, { status: "running", started_at: state.started_at ?? at }) },
          keep(c),
          c.now,
          false,
        ),
      );
  }
}

/** The outbox was published: emptied; a run that waits for a person or has ended is let go without a due time. */
export function published(run: RunDoc, c: Clock): RunWrite {
  return written(run, { outbox: [] }, isParked(run) ? PARKED : keep(c), c.now, true);
}

/** The engine stops: the run is handed back, due now, for any node to go on. */
export function handBack(run: RunDoc, c: Clock): RunWrite {
  return written(run, {}, { kind: "due", at: c.now }, c.now, true);
}

/**
 * The run was claimed more than MAX_STALLS times in a row and no drive of it stored any progress:
 * it is not tried again. Events it could not publish (what stalled it, most likely) are dropped.
 * The run fails, saying why (`why`), at the step whose event was dropped (an emit step: the run did
 * not do what it would report), or else at its current step; a run that had ended otherwise, or
 * waits for approval, keeps its state. Its workflow.completed is published as usual.
 */
export function giveUp(run: RunDoc, c: Clock): { write: RunWrite; dropped: OutboxEvent[]; why: string | null } {
  const tries = `in ${MAX_STALLS} tries in a row`;
  const dropped = run.outbox;
  const lost = dropped.find((e) => e.type !== "workflow.completed" && e.type !== "approval.requested");
  const culprit = lost ? run.steps.findIndex((s) => (s.output as { event_id?: unknown } | null)?.event_id === lost.id) : -1;
  if (isParked(run) && !(culprit >= 0 && run.status === "succeeded"))
    return { write: written(run, { outbox: [] }, PARKED, c.now, true), dropped, why: null };
  const why = lost
    ? `the event ${lost.type} (${lost.id}) could not be stored ${tries}; given up`
    : `the run stopped: its progress could not be stored ${tries} (the store failed, or the node driving it stopped); given up`;
  const at = { ...run, cursor: culprit >= 0 ? culprit : Math.min(run.cursor, run.steps.length - 1), outbox: [] };
  return { write: written(run, finish(at, "failed", iso(c.now), "failed", why), keep(c), c.now, true), dropped, why };
}

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
 * is kept on the run and in its workflow.completed, with why: asked for, or its workflow deleted.
 */
export function cancel(run: RunDoc, now: number, d?: Decider, reason: "requested" | "workflow_deleted" = "requested"): RunWrite {
  if (TERMINAL.has(run.status)) throw new ApiError("invalid_state", `The run has ended (${run.status})`, { param: "run_id" });
  const by = d ? { cancelled_by: d.by, cancel_reason: reason } : {};
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
