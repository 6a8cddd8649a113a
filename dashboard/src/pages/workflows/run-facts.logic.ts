/**
 * What the run page tells about a run beyond its raw fields: why a step was skipped, which step
 * stopped or failed the run, which time limit passed, until when it waits, and the wait before
 * each retry. Pure functions of the run (`GET …/runs/{id}`) and, when it is still kept, the
 * definition of the workflow version it ran (`GET …/versions/{version}`), which holds the steps'
 * conditions and time limits.
 */
import type { Run, RunStep, Step, StepAttempt } from "../../../../shared/api/wire";

const sameIds = (steps: readonly Step[], run: Pick<Run, "steps">) =>
  steps.length === run.steps.length && steps.every((s, i) => s.id === run.steps[i].id);

function findStep(steps: readonly Step[], id: string): Step | undefined {
  for (const s of steps) {
    if (s.id === id) return s;
    const inner = s.type === "map" ? (s.steps ?? []) : s.type === "parallel" ? Object.values(s.branches).flat() : [];
    const found = findStep(inner, id);
    if (found) return found;
  }
  return undefined;
}

/**
 * The list of steps a run follows in its version's definition (`steps`): the top level; or, for a
 * child of an inline map or of a parallel branch (which runs its parent's workflow version), that
 * list inside its parent step. Undefined when the version is not kept or no list matches the run's.
 */
export function stepsOfRun(steps: readonly Step[] | undefined, run: Pick<Run, "steps" | "parent">): readonly Step[] | undefined {
  if (!steps) return undefined;
  if (run.parent) {
    const at = findStep(steps, run.parent.step_id);
    const inner = at?.type === "parallel" ? Object.values(at.branches)[run.parent.index] : at?.type === "map" ? at.steps : undefined;
    if (inner && sameIds(inner, run)) return inner;
  }
  return sameIds(steps, run) ? steps : undefined;
}

/** The run's steps as its workflow version defined them, by id (empty: the version is not kept). */
export const definitionsOf = (steps: readonly Step[] | undefined): ReadonlyMap<string, Step> =>
  new Map((steps ?? []).map((s) => [s.id, s]));

/** The step a failed run failed at: the last that failed (as `failed_step` in workflow.completed), or null. */
export function failedStepOf(run: Pick<Run, "status" | "steps">): RunStep | null {
  if (run.status !== "failed") return null;
  return run.steps.findLast((s) => s.status === "failed") ?? null;
}

/** The stop step that ended the run (it ends the run whatever its status), or null. */
export const stopStepOf = (run: Pick<Run, "steps">): RunStep | null =>
  run.steps.find((s) => s.type === "stop" && (s.status === "succeeded" || s.status === "failed")) ?? null;

/** The step that ended the run early (stopped, failed or cancelled there), or null when the run went through. */
const endStepOf = (run: Pick<Run, "status" | "steps">): RunStep | null =>
  stopStepOf(run) ?? failedStepOf(run) ?? run.steps.find((s) => s.status === "cancelled") ?? null;

export type SkipReason =
  /** Its `if` was false when the run reached it (null: the condition is not known, the version being gone). */
  | { kind: "condition"; condition: string | null }
  /** The run ended before it, at `at` (null: not known). */
  | { kind: "not_reached"; at: string | null };

/**
 * Why a skipped step did not run. A step whose condition was false is passed over with a finish
 * time; the steps after the one a run ends at are marked skipped without one.
 */
export function skipReasonOf(run: Pick<Run, "status" | "steps">, step: RunStep, definition: Step | undefined): SkipReason | null {
  if (step.status !== "skipped") return null;
  if (step.finished_at !== null) return { kind: "condition", condition: definition?.if ?? null };
  return { kind: "not_reached", at: endStepOf(run)?.id ?? null };
}

/** The time limit that ended the run: the run's own (`run_timed_out`) or an approval's (`timed_out`), or null. */
export type TimedOut =
  { kind: "run"; step: RunStep; deadline: string | null; timeoutMs: number | null } | { kind: "approval"; step: RunStep };

export function timedOutOf(run: Pick<Run, "steps" | "deadline_at" | "timeout_ms">): TimedOut[] {
  return run.steps.flatMap((step): TimedOut[] => {
    if (step.error_code === "run_timed_out")
      return [{ kind: "run", step, deadline: run.deadline_at ?? null, timeoutMs: run.timeout_ms ?? null }];
    if (step.error_code === "timed_out" && step.type === "approval") return [{ kind: "approval", step }];
    return [];
  });
}

/** Until when a waiting run waits: its delay's end, its approval's or event wait's time-out (null: until someone decides). */
export interface Waiting {
  step: RunStep;
  until: string | null;
  /** The run's own deadline, when it comes first. */
  deadline: string | null;
}

export function waitingOf(run: Pick<Run, "status" | "steps" | "deadline_at">, definitions: ReadonlyMap<string, Step>): Waiting | null {
  if (run.status !== "waiting") return null;
  const step = run.steps.find((s) => s.status === "waiting");
  if (!step) return null;
  const definition = definitions.get(step.id);
  let until: string | null = null;
  if (step.type === "approval" || step.type === "wait_for_event" || step.type === "run_workflow") until = step.timeout_at ?? null;
  else if (definition?.type === "delay" && step.started_at)
    until = new Date(Date.parse(step.started_at) + definition.duration_ms).toISOString();
  const deadline = run.deadline_at ?? null;
  const first = deadline !== null && (until === null || Date.parse(deadline) < Date.parse(until));
  return { step, until, deadline: first ? deadline : null };
}

/** An attempt as the page lists it: how long it took and how long the step waited before it. */
export interface AttemptRow extends StepAttempt {
  tookMs: number;
  /** The wait since the attempt before it ended (null: the first, or the one before is no longer kept). */
  waitedMs: number | null;
}

export function attemptRowsOf(attempts: readonly StepAttempt[] | undefined): AttemptRow[] {
  return (attempts ?? []).map((a, i, all) => {
    const before = i > 0 && all[i - 1].attempt === a.attempt - 1 ? all[i - 1] : null;
    return {
      ...a,
      tookMs: Date.parse(a.finished_at) - Date.parse(a.started_at),
      waitedMs: before ? Math.max(0, Date.parse(a.started_at) - Date.parse(before.finished_at)) : null,
    };
  });
}

/** A duration as people read it: `250 ms`, `1.5 s`, `2 min 5 s`, `3 h 20 min`, `2 d 4 h`. */
export function durationText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(ms < 10_000 ? 1 : 0))} s`;
  const units: [string, number][] = [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["min", 60_000],
    ["s", 1000],
  ];
  const at = units.findIndex(([, size]) => ms >= size);
  const [big, bigSize] = units[at];
  const [small, smallSize] = units[at + 1];
  const whole = Math.floor(ms / bigSize);
  const rest = Math.floor((ms - whole * bigSize) / smallSize);
  return rest > 0 ? `${whole} ${big} ${rest} ${small}` : `${whole} ${big}`;
}
