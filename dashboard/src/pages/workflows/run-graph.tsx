import { useMemo } from "preact/hooks";
import type { Step } from "../../../../shared/api/wire";
import { TERMINAL_RUN, type Run } from "../../api";
import { href } from "../../session";
import { ErrorNotice, useApi } from "../../ui";
import { GraphView } from "./graph-view";
import { graphOf } from "./graph.logic";

/** Children the graph reads: one page of the run's newest (docs/decisions/0161-run-graph-children-bounded.md). */
export const GRAPH_CHILDREN_READ = 25;

const FANS_OUT = new Set<Step["type"]>(["map", "parallel", "run_workflow"]);

/**
 * A run drawn as a graph: its definition (`steps`, undefined when the version is no longer kept)
 * with the run's step states and the children read for its map, parallel and run_workflow steps,
 * read again every 3 s until the run ends.
 */
export function RunGraph({ run, steps }: { run: Run; steps: readonly Step[] | undefined }) {
  const fansOut = (steps ?? run.steps).some((s) => FANS_OUT.has(s.type));
  const children = useApi<Run[]>(
    fansOut ? "/runs" : null,
    { parent_run_id: run.id, per_page: GRAPH_CHILDREN_READ },
    TERMINAL_RUN.has(run.status) ? undefined : 3000,
  );
  const graph = useMemo(() => graphOf(steps, { run, children: children.data ?? [] }), [steps, run, children.data]);
  return (
    <>
      <GraphView graph={graph} label="Run graph" childrenHref={href("workflows", run.workflow_id, "runs", run.id, "children")} />
      <ErrorNotice error={children.error} />
    </>
  );
}
