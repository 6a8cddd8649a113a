/**
 * Which children the run graph reads (docs/decisions/0161-run-graph-children-bounded.md): for each
 * map, parallel and run_workflow step the run has reached, one page of that step's children in item
 * order (`GET /runs?parent_run_id=&step_id=`); then the same for those steps inside the branches of
 * its parallels, in the branch runs read. At most GRAPH_READS_MAX reads, in the order the steps are
 * drawn. Pure: the page sends them and hands what they answer to graphOf.
 */
import type { Run, RunStep, Step } from "../../../../shared/api/wire";
import { MAP_CHILDREN_SHOWN } from "./graph.logic";

/** Reads of step children per refresh, at most: the rest of the steps are drawn from their outputs alone. */
export const GRAPH_READS_MAX = 12;

/** One page of one step's children. */
export interface ChildRead {
  parentRunId: string;
  stepId: string;
  /** Twice the items shown: each item's newest run comes first, so one retry of each still fits. */
  limit: number;
}

type Found = Pick<Run, "id" | "status" | "steps" | "parent">;

/** Children a step's page holds: a run_workflow's newest child, a parallel's branches or a map's first items, with room for a retry each. */
function limitOf(step: Step): number | null {
  switch (step.type) {
    case "run_workflow":
      return 1;
    case "parallel":
      return 2 * Object.keys(step.branches).length;
    case "map":
      return 2 * MAP_CHILDREN_SHOWN;
    default:
      return null;
  }
}

/** A step that has started children: it ran, or runs, or waits. */
const reached = (state: RunStep | undefined) => state !== undefined && state.status !== "pending" && state.status !== "skipped";

/** The reads for one run's steps that have children. */
export function readsOf(runId: string, steps: readonly Step[], states: readonly RunStep[]): ChildRead[] {
  return steps.flatMap((step) => {
    const limit = limitOf(step);
    return limit !== null && reached(states.find((s) => s.id === step.id)) ? [{ parentRunId: runId, stepId: step.id, limit }] : [];
  });
}

/** The newest run of each branch of `parallel` among `found` (its step's children, in item order). */
function branchRuns(parallel: Extract<Step, { type: "parallel" }>, found: readonly Found[]): [Step[], Found][] {
  const lists = Object.values(parallel.branches);
  const runs: [Step[], Found][] = [];
  for (const run of found) {
    const index = run.parent?.index ?? -1;
    if (lists[index] && !runs.some(([, r]) => r.parent?.index === index)) runs.push([lists[index], run]);
  }
  return runs;
}

/**
 * The reads of a refresh, in two rounds: `first` for the run's own steps, then `then(found)` for
 * the steps inside its parallels' branches, given what the first round found (children by step id).
 * Both together stay within GRAPH_READS_MAX.
 */
export function graphReads(
  runId: string,
  steps: readonly Step[],
  states: readonly RunStep[],
): { first: ChildRead[]; then: (found: ReadonlyMap<string, readonly Found[]>) => ChildRead[] } {
  const first = readsOf(runId, steps, states).slice(0, GRAPH_READS_MAX);
  const then = (found: ReadonlyMap<string, readonly Found[]>) =>
    steps
      .filter((s): s is Extract<Step, { type: "parallel" }> => s.type === "parallel")
      .flatMap((parallel) => branchRuns(parallel, found.get(parallel.id) ?? []))
      .flatMap(([branch, run]) => readsOf(run.id, branch, run.steps))
      .slice(0, GRAPH_READS_MAX - first.length);
  return { first, then };
}
