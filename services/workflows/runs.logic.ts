import { newId } from "../../shared/ids";
import { describeJsonFault, findJsonFault } from "../../shared/json-limits";
import { FINISHED_RUN_STATUSES, type Run, type RunStatus, type RunTrigger, type StepStatus } from "../../shared/wire";
import { checkReadable } from "./outputs";
import type { Step, WorkflowDoc } from "./workflows.logic";

/**
 * Runs (contract section 6) as a state machine over a stored document. Every change is one write:
 * the engine writes under its lease (compare-and-set on `lease`), the API (approve, reject, cancel)
 * under the revision it read (`rev`). Events the run must publish go into its `outbox` in the same
 * write, each with its id chosen then, so publishing them again after a crash stores nothing twice.
 */
export { RUN_STATUSES, type RunStatus, type RunStep, type RunTrigger, type StepStatus } from "../../shared/wire";
export const TERMINAL: ReadonlySet<RunStatus> = new Set(FINISHED_RUN_STATUSES);

export interface OutboxEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/** A run as stored: what the API shows (shared/wire.ts) and the fields that run it. */
export interface RunDoc extends Run {
  org_id: string;
  /** Internal: the steps as they were when the run started (the workflow may change meanwhile). */
  definition: Step[];
  /** Internal: index of the current step. */
  cursor: number;
  /** Internal: bumped by every write; the API's compare-and-set. */
  rev: number;
  /** Internal: ms since the epoch when the engine has work on this run; absent while it waits for a person or has ended. */
  due_at?: number;
  /** Internal: the engine node's claim. */
  lease?: string;
  /** Internal: claims in a row that stored no progress of the run (see the engine's MAX_STALLS). */
  stalls?: number;
  outbox: OutboxEvent[];
  /** Internal, event-started runs: `<workflow_id>/<event_id>`, unique, so an event starts a workflow once. */
  trigger_key?: string;
  /** Internal: event-started runs in the chain that led to this one (its events carry it on). */
  chain_depth?: number;
  /** Internal, event-started runs: the root event of their chain, whose run budget they count against. */
  chain_root?: string;
}

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
  ...view
}: RunDoc): RunView => view;

/** Event-started runs in a row (a run's event starting another workflow's run, …) before the chain stops. */
export const MAX_CHAIN_DEPTH = 10;

export function newRun(
  workflow: WorkflowDoc,
  input: Record<string, unknown>,
  trigger: RunTrigger,
  nowMs: number,
  chainDepth = 0,
  chainRoot?: string,
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
      attempts: 0,
      started_at: null,
      finished_at: null,
    })),
    trigger,
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
  };
}

/** `workflow.completed`, with the run's terminal status. */
export const completedEvent = (run: Pick<RunDoc, "workflow_id" | "id">, status: RunStatus): OutboxEvent => ({
  id: newId("evt"),
  type: "workflow.completed",
  data: { workflow_id: run.workflow_id, run_id: run.id, status },
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
): Partial<RunDoc> {
  const steps = run.steps.map((s, i) => {
    if (i === run.cursor && stepStatus)
      return { ...s, status: stepStatus, error: error ?? s.error, finished_at: at, started_at: s.started_at ?? at };
    if (i >= run.cursor && (s.status === "pending" || s.status === "running" || s.status === "waiting"))
      return { ...s, status: "skipped" as const };
    return s;
  });
  return { status, steps, finished_at: at, outbox: [...run.outbox, completedEvent(run, status)] };
}

// Templates ---------------------------------------------------------------------------------------

const TEMPLATE = /\{\{(.*?)\}\}/g;
const WHOLE = /^\{\{([^{}]*)\}\}$/;

export interface TemplateScope {
  input: unknown;
  steps: Record<string, { output: unknown }>;
}

export function scopeOf(run: RunDoc): TemplateScope {
  const steps: TemplateScope["steps"] = {};
  for (const s of run.steps) if (s.status === "succeeded") steps[s.id] = { output: s.output };
  return { input: run.input, steps };
}

/** The value at a dotted path: own members only (`{{input.constructor}}` is a key of the input or nothing). */
function lookup(scope: TemplateScope, expression: string): unknown {
  let value: unknown = scope;
  const parts = expression.trim().split(".");
  for (const [i, part] of parts.entries()) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
    // A truncated output (outputs.ts) cannot be read into: throws TemplateError.
    if (i === 2 && parts[0] === "steps") checkReadable(value, parts[1], parts.slice(3), expression);
  }
  return value;
}

/**
 * Fills `{{input.…}}` and `{{steps.<id>.output.…}}` in every string of `value`. A string that is one
 * template alone takes the value itself (a number stays a number); inside text, values are written
 * as text (objects as JSON) and a missing value as nothing.
 */
export function render(value: unknown, scope: TemplateScope): unknown {
  if (typeof value === "string") {
    const whole = WHOLE.exec(value);
    if (whole) return lookup(scope, whole[1]) ?? null;
    return value.replace(TEMPLATE, (_m, expression: string) => {
      const found = lookup(scope, expression);
      if (found === undefined || found === null) return "";
      return typeof found === "string" ? found : JSON.stringify(found);
    });
  }
  if (Array.isArray(value)) return value.map((v) => render(v, scope));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, render(v, scope)]));
  }
  return value;
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

/** Wait before retry `attempt` (1-based) of an http step: base, doubled each time, at most a minute. */
export const retryDelay = (baseMs: number, attempt: number): number => Math.min(60_000, baseMs * 2 ** (attempt - 1));
