import fc from "fast-check";
import { graphOf, incomingOf, labelOf, MAP_CHILDREN_SHOWN, type RunState } from "../../../dashboard/src/pages/workflows/graph.logic";
import type { Run, RunStep, Step } from "../../../shared/api/wire";

const T = "2026-11-27T10:00:00.000Z";
const state = (id: string, over: Partial<RunStep> = {}): RunStep => ({
  id,
  type: "set",
  status: "succeeded",
  output: null,
  error: null,
  attempt_count: 1,
  started_at: T,
  finished_at: T,
  ...over,
});
const set = (id: string, extra: Partial<Step> = {}) => ({ id, type: "set", output: 1, ...extra }) as Step;
type ChildRun = RunState["children"][number];
const child = (id: string, stepId: string, index: number, status: Run["status"], steps: RunStep[] = []): ChildRun => ({
  id,
  status,
  steps,
  workflow_id: "wf_parent",
  parent: { run_id: "run_p", step_id: stepId, index },
});
const runState = (status: Run["status"], steps: RunStep[], children: ChildRun[] = []): RunState => ({
  run: { status, steps, workflow_id: "wf_parent" },
  children,
});

describe("a definition as a graph", () => {
  it("puts steps one after another, with a condition and no status", () => {
    const g = graphOf([set("a"), set("b", { if: "input.x > 1" }), { id: "c", type: "emit", event_type: "x.done", data: {} }]);
    expect(g.top.map((n) => [n.key, n.status, n.condition, n.label])).toEqual([
      ["a", null, null, "sets an output"],
      ["b", null, "input.x > 1", "sets an output"],
      ["c", null, null, "emits x.done"],
    ]);
    expect(g.edges).toEqual([
      { from: "a", to: "b", kind: "sequence" },
      { from: "b", to: "c", kind: "sequence" },
    ]);
  });

  it("fans a parallel out to its branches' first steps and joins their last steps back, nested too", () => {
    const inner: Step = { id: "deep", type: "parallel", branches: { x: [set("x1")], y: [set("y1"), set("y2")] } };
    const g = graphOf([
      set("start"),
      { id: "both", type: "parallel", branches: { crm: [set("contact"), inner], billing: [set("account")] } },
      set("end"),
    ]);
    const both = g.top[1];
    expect(both.lanes.map((l) => [l.key, l.name, l.nodes.map((n) => n.key)])).toEqual([
      ["both.crm", "crm", ["both.crm.contact", "both.crm.deep"]],
      ["both.billing", "billing", ["both.billing.account"]],
    ]);
    expect(both.lanes[0].nodes[1].lanes.map((l) => l.nodes.map((n) => n.key))).toEqual([
      ["both.crm.deep.x.x1"],
      ["both.crm.deep.y.y1", "both.crm.deep.y.y2"],
    ]);
    expect(g.edges).toEqual(
      expect.arrayContaining([
        { from: "start", to: "both", kind: "sequence" },
        { from: "both", to: "end", kind: "sequence" },
        { from: "both", to: "both.crm.contact", kind: "fork" },
        { from: "both.crm.deep", to: "both", kind: "join" },
        { from: "both", to: "both.billing.account", kind: "fork" },
        { from: "both.billing.account", to: "both", kind: "join" },
        { from: "both.crm.deep", to: "both.crm.deep.y.y1", kind: "fork" },
        { from: "both.crm.deep.y.y2", to: "both.crm.deep", kind: "join" },
        { from: "both.crm.contact", to: "both.crm.deep", kind: "sequence" },
      ]),
    );
    expect(g.edges).toContainEqual({ from: "both.crm.deep.y.y1", to: "both.crm.deep.y.y2", kind: "sequence" });
    expect(g.edges).toHaveLength(12);
    expect(incomingOf(g).get("both.crm.contact")).toBe("fork");
    expect(incomingOf(g).get("end")).toBe("sequence");
    expect(incomingOf(g).has("start")).toBe(false);
  });

  it("draws a map as one node, with the steps each item runs in a lane, or the workflow it runs", () => {
    const g = graphOf([
      { id: "each", type: "map", items: "{{ input.orders }}", max_concurrency: 5, tolerated_failures: 0, steps: [set("total")] },
      { id: "saved", type: "map", items: "{{ input.orders }}", max_concurrency: 10, tolerated_failures: 0, workflow_id: "wf_abc" },
    ]);
    expect(g.top[0]).toMatchObject({ label: "for each of {{ input.orders }}, 5 at once", workflowId: null, counts: null, children: [] });
    expect(g.top[0].lanes).toMatchObject([{ key: "each.each", name: "each item", nodes: [{ key: "each.each.total" }] }]);
    expect(g.top[1]).toMatchObject({ lanes: [], workflowId: "wf_abc" });
    // A map's own steps are not branches: no fork or join.
    expect(g.edges).toEqual([{ from: "each", to: "saved", kind: "sequence" }]);
  });

  it("says what a wait waits for and for how long at most", () => {
    const g = graphOf([
      {
        id: "pay",
        type: "wait_for_event",
        event_type: "payment.succeeded",
        match: { "data.order": "{{ input.id }}" },
        filter: "event.data.ok",
        timeout_ms: 60_000,
      },
      { id: "nap", type: "delay", duration_ms: 5000 },
      { id: "call", type: "run_workflow", workflow_id: "{{ input.wf }}", input: {}, wait: true },
    ]);
    expect(g.top.map((n) => n.wait)).toEqual([
      {
        kind: "event",
        eventType: "payment.succeeded",
        match: { "data.order": "{{ input.id }}" },
        filter: "event.data.ok",
        until: null,
        limitMs: 60_000,
      },
      { kind: "delay", until: null, limitMs: 5000 },
      { kind: "child", until: null, limitMs: null },
    ]);
    // A template names no workflow to link to.
    expect(g.top[2].workflowId).toBeNull();
  });

  it("labels every kind of step with a non-empty text", () => {
    const steps: Step[] = [
      { id: "h", type: "http", method: "GET", url: "https://x.test", headers: {}, body: null, timeout_ms: 1, retries: 0 },
      { id: "d", type: "delay", duration_ms: 1 },
      { id: "a", type: "approval", message: null },
      { id: "s", type: "stop", status: "failed", message: null },
      { id: "p", type: "parallel", branches: { one: [set("x")] } },
      { id: "r", type: "run_workflow", workflow_id: "wf_1", input: {}, wait: false },
    ];
    expect(steps.map(labelOf)).toEqual([
      "GET https://x.test",
      "waits a while",
      "asks a person",
      "ends the run as failed",
      "1 branch at once",
      "runs a saved workflow as a child run, without waiting",
    ]);
  });

  it("gives every node a key of its own, whatever the nesting (ids unique in each list)", () => {
    const stepsOf = (depth: number): fc.Arbitrary<Step[]> =>
      fc
        .array(
          depth === 0
            ? fc.constant(set("leaf"))
            : fc.oneof(
                fc.constant(set("leaf")),
                stepsOf(depth - 1).map(
                  (s) => ({ id: "fork", type: "parallel", branches: { a: s.length ? s : [set("x")], b: [set("y")] } }) as Step,
                ),
              ),
          { minLength: 1, maxLength: 4 },
        )
        .map((list) => list.map((s, i) => ({ ...s, id: `${s.id}${i}` })));
    fc.assert(
      fc.property(stepsOf(3), (steps) => {
        const g = graphOf(steps);
        return new Set(g.nodes.map((n) => n.key)).size === g.nodes.length;
      }),
    );
  });
});

describe("a run as a graph", () => {
  it("shows each step's status and why a skipped one was skipped", () => {
    const defs: Step[] = [set("a"), set("b", { if: "input.big" }), { id: "halt", type: "stop", status: "failed", message: null }, set("c")];
    const g = graphOf(
      defs,
      runState("failed", [
        state("a"),
        state("b", { status: "skipped", started_at: null }),
        state("halt", { type: "stop", status: "failed", error_code: "stopped" }),
        state("c", { status: "skipped", started_at: null, finished_at: null }),
      ]),
    );
    expect(g.top.map((n) => [n.id, n.status, n.skipped])).toEqual([
      ["a", "succeeded", null],
      ["b", "skipped", { kind: "condition", condition: "input.big" }],
      ["halt", "failed", null],
      ["c", "skipped", { kind: "not_reached", at: "halt" }],
    ]);
  });

  it("says until when a waiting step waits, with its match filled", () => {
    const defs: Step[] = [
      { id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: { "data.order": "{{ input.id }}" }, timeout_ms: 60_000 },
      { id: "nap", type: "delay", duration_ms: 5000 },
    ];
    const waiting = graphOf(
      defs,
      runState("waiting", [
        state("pay", {
          type: "wait_for_event",
          status: "waiting",
          finished_at: null,
          waiting_for: { event_type: "payment.succeeded", match: { "data.order": "o_1" } },
          timeout_at: "2026-11-27T10:01:00.000Z",
        }),
        state("nap", { type: "delay", status: "pending", started_at: null, finished_at: null }),
      ]),
    );
    expect(waiting.top[0].wait).toMatchObject({ match: { "data.order": "o_1" }, until: "2026-11-27T10:01:00.000Z" });
    expect(waiting.top[1].wait).toEqual({ kind: "delay", until: null, limitMs: 5000 });
    const napping = graphOf(
      defs,
      runState("waiting", [
        state("pay", { type: "wait_for_event" }),
        state("nap", { type: "delay", status: "waiting", finished_at: null }),
      ]),
    );
    // A finished wait no longer has an until; a waiting delay ends its length after it started.
    expect(napping.top[0].wait?.until).toBeNull();
    expect(napping.top[1].wait?.until).toBe("2026-11-27T10:00:05.000Z");
  });

  it("gives a parallel's branches their child runs and those runs' step statuses", () => {
    const defs: Step[] = [
      { id: "both", type: "parallel", branches: { crm: [set("contact")], billing: [set("account"), set("bill", { if: "false" })] } },
    ];
    const g = graphOf(
      defs,
      runState(
        "waiting",
        [state("both", { type: "parallel", status: "waiting", output: { count: 2, started: 2, running: 1, succeeded: 1, failed: 0 } })],
        [
          child("run_b", "both", 1, "running", [
            state("account", { status: "running", finished_at: null }),
            state("bill", { status: "pending", started_at: null, finished_at: null }),
          ]),
          child("run_a", "both", 0, "succeeded", [state("contact")]),
        ],
      ),
    );
    const [crm, billing] = g.top[0].lanes;
    expect(crm.child).toEqual({ runId: "run_a", workflowId: "wf_parent", status: "succeeded", index: 0 });
    expect(crm.nodes.map((n) => n.status)).toEqual(["succeeded"]);
    expect(billing.child?.runId).toBe("run_b");
    expect(billing.nodes.map((n) => [n.id, n.status, n.condition])).toEqual([
      ["account", "running", null],
      ["bill", "pending", "false"],
    ]);
    expect(g.top[0].counts).toEqual({ count: 2, succeeded: 1, failed: 0, running: 1, other: 0 });
  });

  it("finds an ended parallel's branches by its output when their children were not read, without their statuses", () => {
    const defs: Step[] = [{ id: "both", type: "parallel", branches: { crm: [set("contact")] } }];
    const g = graphOf(
      defs,
      runState("succeeded", [
        state("both", { type: "parallel", output: { crm: { run_id: "run_old", status: "succeeded", output: null } } }),
      ]),
    );
    expect(g.top[0].lanes[0].child).toEqual({ runId: "run_old", workflowId: "wf_parent", status: "succeeded", index: 0 });
    expect(g.top[0].lanes[0].nodes[0].status).toBeNull();
  });

  it("lists at most a bounded number of a map's children, by index, the newest child of an index", () => {
    const defs: Step[] = [
      { id: "each", type: "map", items: "{{ input.xs }}", max_concurrency: 10, tolerated_failures: 5, steps: [set("one")] },
    ];
    const children = Array.from({ length: 30 }, (_, i) => child(`run_${29 - i}`, "each", 29 - i, i % 3 === 0 ? "failed" : "succeeded"));
    // A retry's new child for index 2, newer than the first.
    children.unshift(child("run_2_again", "each", 2, "running"));
    children.push(child("run_other", "elsewhere", 0, "succeeded"));
    const g = graphOf(
      defs,
      runState(
        "waiting",
        [state("each", { type: "map", status: "waiting", output: { count: 1000, started: 40, running: 10, succeeded: 20, failed: 10 } })],
        children,
      ),
    );
    const map = g.top[0];
    expect(map.children).toHaveLength(MAP_CHILDREN_SHOWN);
    expect(map.children.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(map.children[2]).toMatchObject({ runId: "run_2_again", status: "running" });
    expect(map.counts).toEqual({ count: 1000, succeeded: 20, failed: 10, running: 10, other: 960 });
    // The each-item lane is the definition: no statuses.
    expect(map.lanes[0].nodes[0].status).toBeNull();
  });

  it("links a run_workflow step to its child, read or named by its output", () => {
    const defs: Step[] = [{ id: "call", type: "run_workflow", workflow_id: "wf_leaf", input: {}, wait: true }];
    const waiting = runState("waiting", [
      state("call", { type: "run_workflow", status: "waiting", output: { run_id: "run_c" }, timeout_at: T }),
    ]);
    expect(graphOf(defs, waiting).top[0]).toMatchObject({
      children: [{ runId: "run_c", workflowId: "wf_leaf", status: null, index: 0 }],
      wait: { kind: "child", until: T },
      workflowId: "wf_leaf",
    });
    const read = { ...waiting, children: [{ ...child("run_c", "call", 0, "waiting"), workflow_id: "wf_leaf" }] };
    expect(graphOf(defs, read).top[0].children).toEqual([{ runId: "run_c", workflowId: "wf_leaf", status: "waiting", index: 0 }]);
  });

  it("draws a run whose definition is no longer kept from its own steps", () => {
    const g = graphOf(
      undefined,
      runState("failed", [
        state("a", { type: "http", status: "failed" }),
        state("b", { type: "parallel", status: "skipped", started_at: null, finished_at: null }),
      ]),
    );
    expect(g.top.map((n) => [n.id, n.type, n.status, n.skipped?.kind ?? null, n.label])).toEqual([
      ["a", "http", "failed", null, ""],
      ["b", "parallel", "skipped", "not_reached", ""],
    ]);
    expect(g.edges).toEqual([{ from: "a", to: "b", kind: "sequence" }]);
  });
});
