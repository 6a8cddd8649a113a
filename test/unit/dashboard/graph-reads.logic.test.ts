import { GRAPH_READS_MAX, graphReads, readsOf } from "../../../dashboard/src/pages/workflows/graph-reads.logic";
import { graphOf, MAP_CHILDREN_SHOWN } from "../../../dashboard/src/pages/workflows/graph.logic";
import type { Run, RunStep, Step } from "../../../shared/api/wire";

const T = "2026-11-27T10:00:00.000Z";
const state = (id: string, type: Step["type"], status: RunStep["status"] = "succeeded"): RunStep => ({
  id,
  type,
  status,
  output: null,
  error: null,
  attempt_count: 1,
  started_at: T,
  finished_at: T,
});
const set = (id: string) => ({ id, type: "set", output: 1 }) as Step;
const map = (id: string) => ({ id, type: "map", items: "{{ input.xs }}", max_concurrency: 2, steps: [set("one")] }) as Step;
const call = (id: string) => ({ id, type: "run_workflow", workflow_id: "wf_leaf" }) as Step;
const parallel = (id: string, branches: Record<string, Step[]>) => ({ id, type: "parallel", branches }) as Step;
const run = (id: string, stepId: string, index: number, steps: RunStep[], status: Run["status"] = "running") => ({
  id,
  status,
  steps,
  workflow_id: "wf_parent",
  parent: { run_id: "run_p", step_id: stepId, index },
});

describe("the children the run graph reads", () => {
  it("reads a page of each reached map, parallel and run_workflow step, in order, with room for a retry of each item", () => {
    const steps = [set("a"), map("each"), parallel("both", { x: [set("x")], y: [set("y")], z: [set("z")] }), call("child"), map("later")];
    const states = [
      state("a", "set"),
      state("each", "map", "waiting"),
      state("both", "parallel", "failed"),
      state("child", "run_workflow", "skipped"),
    ];
    expect(readsOf("run_p", steps, states)).toEqual([
      { parentRunId: "run_p", stepId: "each", limit: 2 * MAP_CHILDREN_SHOWN },
      { parentRunId: "run_p", stepId: "both", limit: 6 },
    ]);
    expect(readsOf("run_p", steps, [state("child", "run_workflow", "running")])).toEqual([
      { parentRunId: "run_p", stepId: "child", limit: 1 },
    ]);
  });

  it("then reads the steps inside the branches of the runs found, the newest run of each branch, within the bound", () => {
    const steps = [parallel("both", { crm: [set("c"), map("inner")], billing: [call("pay")] })];
    const reads = graphReads("run_p", steps, [state("both", "parallel", "running")]);
    expect(reads.first).toEqual([{ parentRunId: "run_p", stepId: "both", limit: 4 }]);
    const found = [
      run("run_crm2", "both", 0, [state("c", "set"), state("inner", "map", "waiting")]),
      run("run_crm1", "both", 0, [state("c", "set"), state("inner", "map", "failed")], "failed"),
      run("run_bill", "both", 1, [state("pay", "run_workflow", "pending")]),
    ];
    expect(reads.then(new Map([["both", found]]))).toEqual([{ parentRunId: "run_crm2", stepId: "inner", limit: 2 * MAP_CHILDREN_SHOWN }]);
    expect(reads.then(new Map())).toEqual([]);
  });

  it(`sends at most ${GRAPH_READS_MAX} reads, the first steps first`, () => {
    const many = Array.from({ length: 30 }, (_, i) => map(`m${i}`));
    const reads = graphReads(
      "run_p",
      [parallel("both", { a: many }), ...many],
      [state("both", "parallel"), ...many.map((s) => state(s.id, "map"))],
    );
    expect(reads.first).toHaveLength(GRAPH_READS_MAX);
    expect(reads.first[0].stepId).toBe("both");
    expect(reads.first.at(-1)?.stepId).toBe(`m${GRAPH_READS_MAX - 2}`);
    expect(
      reads.then(
        new Map([
          [
            "both",
            [
              run(
                "run_a",
                "both",
                0,
                many.map((s) => state(s.id, "map")),
              ),
            ],
          ],
        ]),
      ),
    ).toEqual([]);
    const fewer = graphReads("run_p", [parallel("both", { a: many })], [state("both", "parallel")]);
    expect(
      fewer.then(
        new Map([
          [
            "both",
            [
              run(
                "run_a",
                "both",
                0,
                many.map((s) => state(s.id, "map")),
              ),
            ],
          ],
        ]),
      ),
    ).toHaveLength(GRAPH_READS_MAX - 1);
  });

  it("draws a map nested in a branch with the children read for the branch's run", () => {
    const steps = [parallel("both", { crm: [map("inner")] })];
    const branch = run("run_crm", "both", 0, [state("inner", "map", "waiting")]);
    const items = [0, 1, 2].map((i) => ({
      ...run(`run_i${i}`, "inner", i, [], "succeeded"),
      parent: { run_id: "run_crm", step_id: "inner", index: i },
    }));
    const g = graphOf(steps, {
      run: { status: "running", steps: [state("both", "parallel", "waiting")], workflow_id: "wf_parent" },
      children: [branch],
      below: new Map([["run_crm", items]]),
    });
    const inner = g.top[0].lanes[0].nodes[0];
    // Its children are the branch run's, listed under it; the parallel's are the run's own.
    expect([g.top[0].inRun, inner.inRun]).toEqual([null, { runId: "run_crm", workflowId: "wf_parent" }]);
    expect([inner.status, inner.children.map((c) => [c.index, c.runId, c.status])]).toEqual([
      "waiting",
      [
        [0, "run_i0", "succeeded"],
        [1, "run_i1", "succeeded"],
        [2, "run_i2", "succeeded"],
      ],
    ]);
  });
});
