import type { MapStep, ParallelStep, RunStep } from "../../shared/api/wire";
import { MAP_ITEMS_MAX } from "./child-limits";
import { childKey } from "./child-runs.logic";
import { boundedOutput, jsonBytes, outputsBytes, TemplateError } from "./outputs";
import type { RunDoc } from "./run-doc";
import { iso, PARKED, put, written, type Clock, type RunWrite } from "./run-write.logic";
import { advance, fail, newRun } from "./runs.logic";
import { render, scopeOf } from "./templates";
import type { WorkflowDoc } from "./workflows.logic";

/**
 * `map` and `parallel` steps (docs/workflows/README.md#map, #parallel): each item or branch is a
 * child run of the step, started by the parent's drives (fan-out.ts) up to the step's
 * concurrency. The parent keeps counters in its step's output while it waits, never the children:
 * they are found through the `parent.run_id` index, each stored once under its key (child-runs.logic.ts).
 */

/** Bytes, as JSON, of a map's `results` before the rest are left out (`results_truncated`). */
export const MAP_RESULTS_MAX_BYTES = 48 * 1024;

export type FanOutStep = MapStep | ParallelStep;

/** What the step fans out to: how many children, and each one's steps (or workflow) and input. */
export interface FanOut {
  count: number;
  /** The names of a parallel step's branches, by index. */
  names?: string[];
  /** How many children may be unfinished at once, and how many may fail before the step does. */
  concurrency: number;
  tolerated: number;
  input(index: number): Record<string, unknown>;
}

/** The counters a waiting step shows as its output. */
export interface FanOutProgress {
  count: number;
  started: number;
  running: number;
  succeeded: number;
  failed: number;
}

const branchNames = (step: ParallelStep): string[] => Object.keys(step.branches);

/** The step's children as the run's scope gives them now (the same at each drive: the scope does not change while the step runs). */
export function fanOutOf(run: RunDoc, step: FanOutStep): FanOut | string {
  if (step.type === "parallel") {
    const names = branchNames(step);
    const tolerated = step.on_error === "continue" ? names.length : 0;
    return { count: names.length, names, concurrency: names.length, tolerated, input: () => run.input };
  }
  const items = render(step.items, scopeOf(run));
  if (!Array.isArray(items)) throw new TemplateError(`items gave ${typeof items === "object" ? "an object" : typeof items}, not a list`);
  if (items.length > MAP_ITEMS_MAX)
    return `limit reached: a map step takes at most ${MAP_ITEMS_MAX} items (MAP_ITEMS_MAX); items gave ${items.length}`;
  return {
    count: items.length,
    concurrency: step.max_concurrency,
    tolerated: step.tolerated_failures,
    input: (index) => ({ item: items[index] as unknown, index }),
  };
}

/** The child at `index`, of the step's inline steps (as a run of the parent's workflow) or of `workflow`; queued and due now. */
export function fanChild(
  parent: RunDoc,
  step: FanOutStep,
  index: number,
  input: Record<string, unknown>,
  nowMs: number,
  workflow?: WorkflowDoc,
): RunDoc {
  const steps = step.type === "parallel" ? step.branches[branchNames(step)[index]] : step.steps;
  const own =
    workflow ??
    ({
      id: parent.workflow_id,
      version: parent.workflow_version,
      org_id: parent.org_id,
      environment: parent.environment,
      steps: steps ?? [],
    } as unknown as WorkflowDoc);
  return {
    ...newRun(own, input, { type: "parent" }, nowMs),
    parent: { run_id: parent.id, step_id: step.id, index },
    parent_attempt: parent.attempt ?? 1,
    trigger_key: childKey(parent, step.id, index),
    root_run_id: parent.root_run_id ?? parent.id,
    depth: (parent.depth ?? 0) + 1,
    wakes_parent_at: parent.cursor,
    ...(parent.request_id !== undefined && { request_id: parent.request_id }),
    ...(parent.traceparent !== undefined && { traceparent: parent.traceparent }),
  };
}

const startedOf = (run: RunDoc, c: Clock): Pick<RunStep, "started_at" | "attempt_count"> => ({
  started_at: run.steps[run.cursor].started_at ?? iso(c.now),
  attempt_count: 1,
});

/**
 * Where a drive goes on after finding the child at `next` stored by another drive: past `highest`,
 * the highest index this attempt has stored, since drives start children in index order (each
 * index below it was started, or skipped on a retry); never back.
 */
export function pastStored(next: number, highest: number | undefined): number {
  return Math.max(next + 1, (highest ?? -1) + 1);
}

/** Children are still to end (or to start): the step waits, showing its counters; each child's end makes the run due. */
export function fanWaiting(run: RunDoc, progress: FanOutProgress, c: Clock): RunWrite {
  const steps = put(run, { ...startedOf(run, c), status: "waiting", output: { ...progress } });
  return written(run, { status: "waiting", steps }, PARKED, c.now, true);
}

/** The run-starts budget is spent: the step starts the rest when the next minute begins. */
export function fanDeferred(run: RunDoc, progress: FanOutProgress, c: Clock, at: number): RunWrite {
  const steps = put(run, { ...startedOf(run, c), status: "waiting", output: { ...progress } });
  return written(run, { status: "waiting", steps }, { kind: "due", at }, c.now, true);
}

/** The step's children as read for its output: index, status and output. */
export interface ChildResult {
  id: string;
  index: number;
  status: string;
  output: unknown;
}

/** A map's output: counts and each child's output in item order (null for one that failed), cut at MAP_RESULTS_MAX_BYTES. */
export function mapOutput(progress: FanOutProgress, children: ChildResult[]): Record<string, unknown> {
  const byIndex = new Map(children.map((c) => [c.index, c]));
  const results: unknown[] = [];
  let bytes = 0;
  let truncated = false;
  for (let i = 0; i < progress.count; i += 1) {
    const child = byIndex.get(i);
    const value = child?.status === "succeeded" ? (child.output ?? null) : null;
    bytes += jsonBytes(value) + 1;
    if (bytes > MAP_RESULTS_MAX_BYTES) {
      truncated = true;
      break;
    }
    results.push(value);
  }
  const failedIndexes = children
    .filter((c) => c.status !== "succeeded")
    .map((c) => c.index)
    .sort((a, b) => a - b)
    .slice(0, 100);
  return {
    count: progress.count,
    succeeded: progress.succeeded,
    failed: progress.failed,
    results,
    results_truncated: truncated,
    failed_indexes: failedIndexes,
  };
}

/** A parallel step's output: per branch, its child's id, status and output. */
export function parallelOutput(names: string[], children: ChildResult[]): Record<string, unknown> {
  const byIndex = new Map(children.map((c) => [c.index, c]));
  return Object.fromEntries(
    names.map((name, i) => {
      const child = byIndex.get(i);
      return [
        name,
        {
          run_id: child?.id ?? null,
          status: child?.status ?? "cancelled",
          output: child?.status === "succeeded" ? (child.output ?? null) : null,
        },
      ];
    }),
  );
}

/** A parallel step's branches as its output (parallelOutput) gives them: index and status. */
export function branchesOf(names: string[], output: Record<string, unknown>): { index: number; status: string }[] {
  return names.map((name, index) => ({ index, status: String((output[name] as { status?: unknown } | undefined)?.status) }));
}

/** Why a parallel step failed: each branch that failed or was cancelled (other than by the step), by name, in branch order. */
export function branchesFailed(names: string[], children: { index: number; status: string }[]): string {
  const bad = children
    .filter((c) => c.status !== "succeeded")
    .sort((a, b) => a.index - b.index)
    .map((c) => `'${names[c.index] ?? c.index}' ${c.status === "cancelled" ? "was cancelled" : c.status}`);
  if (bad.length === 0) return "a branch failed or was cancelled";
  return `${bad.length === 1 ? "the branch" : "the branches"} ${bad.join(", ")}`;
}

/** Every child has ended and no more than the tolerated number failed: the step succeeds. */
export function fanSucceeded(run: RunDoc, output: Record<string, unknown>, c: Clock): RunWrite {
  return advance(run, { ...startedOf(run, c), output: boundedOutput(output, outputsBytes(run.steps, run.cursor)) }, c);
}

/** More children failed than the step tolerates (its unfinished ones are cancelled): it fails, `on_error` deciding. */
export function fanFailed(run: RunDoc, why: string, output: Record<string, unknown> | null, c: Clock, code = "child_failed"): RunWrite {
  const patch = { ...startedOf(run, c), output: output === null ? null : boundedOutput(output, outputsBytes(run.steps, run.cursor)) };
  return fail(run, why, c, patch, code);
}
