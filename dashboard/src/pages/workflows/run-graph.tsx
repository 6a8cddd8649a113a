import { useEffect, useMemo, useState } from "preact/hooks";
import type { Step } from "../../../../shared/api/wire";
import { ApiFailure, call, pathWith, TERMINAL_RUN, type Run } from "../../api";
import { href } from "../../session";
import { ErrorNotice, useAccount } from "../../ui";
import { GraphView } from "./graph-view";
import { graphOf, type RunState } from "./graph.logic";
import { graphReads, type ChildRead } from "./graph-reads.logic";

type Children = RunState["children"];

const REFRESH_MS = 3000;

/** One page of one step's children, in item order. */
async function readPage(key: string, r: ChildRead): Promise<Run[]> {
  const query = { parent_run_id: r.parentRunId, step_id: r.stepId, limit: r.limit };
  return (await call<{ data: Run[] }>(key, "GET", pathWith("/runs", query))).data;
}

/**
 * The children the graph draws: a page of each of the run's map, parallel and run_workflow steps,
 * then of those inside its parallels' branches (graph-reads.logic.ts), read again every 3 s until
 * the run ends.
 */
function useGraphChildren(
  run: Run,
  steps: readonly Step[],
): { children: Children; below: Map<string, Children>; error: ApiFailure | null } {
  const { key } = useAccount();
  const [state, setState] = useState<{ children: Children; below: Map<string, Children>; error: ApiFailure | null }>({
    children: [],
    below: new Map(),
    error: null,
  });
  const reads = useMemo(() => graphReads(run.id, steps, run.steps), [run.id, steps, run.steps]);
  // The reads change only when a step reaches its children; the run itself is read again every few seconds.
  const signature = JSON.stringify(reads.first);
  const ended = TERMINAL_RUN.has(run.status);
  useEffect(() => {
    let live = true;
    const load = async () => {
      try {
        const pages = await Promise.all(reads.first.map((r) => readPage(key, r)));
        const byStep = new Map(reads.first.map((r, i) => [r.stepId, pages[i]]));
        const nested = reads.then(byStep);
        const below = new Map<string, Run[]>();
        const deeper = await Promise.all(nested.map((r) => readPage(key, r)));
        nested.forEach((r, i) => below.set(r.parentRunId, [...(below.get(r.parentRunId) ?? []), ...deeper[i]]));
        if (live) setState({ children: pages.flat(), below, error: null });
      } catch (err) {
        if (live) setState((s) => ({ ...s, error: err instanceof ApiFailure ? err : new ApiFailure(0, "client_error", String(err)) }));
      }
    };
    void load();
    const timer = ended ? undefined : setInterval(() => !document.hidden && void load(), REFRESH_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [key, signature, ended]);
  return state;
}

/**
 * A run drawn as a graph: its definition (`steps`, undefined when the version is no longer kept)
 * with the run's step states and the children read for its map, parallel and run_workflow steps.
 */
export function RunGraph({ run, steps }: { run: Run; steps: readonly Step[] | undefined }) {
  const definition = useMemo(() => steps ?? run.steps.map((s) => ({ id: s.id, type: s.type }) as Step), [steps, run.steps]);
  const { children, below, error } = useGraphChildren(run, definition);
  const graph = useMemo(() => graphOf(steps, { run, children, below }), [steps, run, children, below]);
  return (
    <>
      <GraphView graph={graph} label="Run graph" childrenHref={href("workflows", run.workflow_id, "runs", run.id, "children")} />
      <ErrorNotice error={error} />
    </>
  );
}
