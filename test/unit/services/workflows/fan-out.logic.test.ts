import fc from "fast-check";
import {
  fanChild,
  fanOutOf,
  fanWaiting,
  MAP_RESULTS_MAX_BYTES,
  mapOutput,
  parallelOutput,
  pastStored,
  branchesFailed,
  branchesOf,
  type ChildResult,
} from "../../../../services/workflows/fan-out.logic";
import { MAP_ITEMS_MAX } from "../../../../services/workflows/child-limits";
import { TemplateError } from "../../../../services/workflows/outputs";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { newRun } from "../../../../services/workflows/runs.logic";
import type { Step } from "../../../../services/workflows/workflows.logic";
import { claimed, T0, workflow } from "./run-fixtures";

const INNER: Step = { id: "out", type: "set", output: "{{ input.item }}" };
const MAP: Step = { id: "each", type: "map", items: "{{ input.list }}", max_concurrency: 3, tolerated_failures: 1, steps: [INNER] };
const PAR: Step = { id: "both", type: "parallel", branches: { crm: [INNER], billing: [{ ...INNER, id: "b" }] } };
const runOf = (step: Step, input: Record<string, unknown>): RunDoc => claimed(newRun(workflow([step]), input, { type: "manual" }, T0));
const clock = { now: T0 + 1000, leaseMarginMs: 5000 };

describe("a map step's children", () => {
  it("are the items of its template, each child's input {item, index}", () => {
    const plan = fanOutOf(runOf(MAP, { list: ["a", "b"] }), MAP as never);
    if (typeof plan === "string") throw new Error(plan);
    expect(plan).toMatchObject({ count: 2, concurrency: 3, tolerated: 1 });
    expect(plan.input(1)).toEqual({ item: "b", index: 1 });
  });

  it("are refused beyond MAP_ITEMS_MAX, naming it, and a template that is not a list is a template error", () => {
    const many = fanOutOf(runOf(MAP, { list: Array.from({ length: MAP_ITEMS_MAX + 1 }, (_, i) => i) }), MAP as never);
    expect(many).toMatch(/at most 1000 items \(MAP_ITEMS_MAX\); items gave 1001/);
    expect(() => fanOutOf(runOf(MAP, { list: { a: 1 } }), MAP as never)).toThrow(TemplateError);
  });

  it("are stored under the step, index and the parent's attempt, run the inline steps and wake the parent", () => {
    const parent = { ...runOf(MAP, { list: ["a"] }), attempt: 2 };
    const child = fanChild(parent, MAP as never, 0, { item: "a", index: 0 }, T0);
    expect(child).toMatchObject({
      parent: { run_id: parent.id, step_id: "each", index: 0 },
      parent_attempt: 2,
      trigger_key: `parent/${parent.id}/each/0/2`,
      workflow_id: parent.workflow_id,
      definition: [INNER],
      wakes_parent_at: 0,
      depth: 1,
      input: { item: "a", index: 0 },
    });
  });

  it("give results in item order, null for a failed item, cut at MAP_RESULTS_MAX_BYTES with a flag", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.string({ maxLength: 3000 })), { maxLength: 60 }), (items) => {
        const children: ChildResult[] = items.map(([ok, s], index) => ({
          id: `run_${index}`,
          index,
          status: ok ? "succeeded" : "failed",
          output: s,
        }));
        const progress = { count: items.length, started: items.length, running: 0, succeeded: 0, failed: 0 };
        const out = mapOutput(progress, [...children].reverse()) as {
          results: unknown[];
          results_truncated: boolean;
          failed_indexes: number[];
        };
        expect(Buffer.byteLength(JSON.stringify(out.results))).toBeLessThanOrEqual(MAP_RESULTS_MAX_BYTES + 2);
        expect(out.results_truncated).toBe(out.results.length < items.length);
        out.results.forEach((r, i) => expect(r).toBe(items[i][0] ? items[i][1] : null));
        expect(out.failed_indexes).toEqual(
          children
            .filter((c) => c.status === "failed")
            .map((c) => c.index)
            .slice(0, 100),
        );
      }),
    );
  });

  it("show their counters on the waiting step, which has no due time", () => {
    const run = runOf(MAP, { list: ["a"] });
    const write = fanWaiting(run, { count: 1, started: 1, running: 1, succeeded: 0, failed: 0 }, clock);
    expect(write.set.status).toBe("waiting");
    expect(write.set.steps?.[0]).toMatchObject({ status: "waiting", output: { count: 1, started: 1, running: 1 } });
    expect(write.unset.due_at).toBe(true);
  });
});

describe("a drive that finds a child stored by another drive", () => {
  it("goes on at the first index not stored, whatever the gap, never back", () => {
    // Drives start children in index order, so the stored ones are always indexes 0..stored-1.
    fc.assert(
      fc.property(fc.integer({ min: 1, max: MAP_ITEMS_MAX }), fc.nat(MAP_ITEMS_MAX), (stored, at) => {
        const next = at % stored;
        expect(pastStored(next, stored - 1)).toBe(stored);
      }),
    );
    expect(pastStored(646, 763)).toBe(764);
    expect(pastStored(5, 5)).toBe(6);
    // Read before the other drive's child was seen (a store that lags): still one on.
    expect(pastStored(5, 3)).toBe(6);
    expect(pastStored(5, undefined)).toBe(6);
  });
});

describe("a parallel step's children", () => {
  it("are its branches, each with the run's input, all at once; on_error continue tolerates every failure", () => {
    const plan = fanOutOf(runOf(PAR, { who: "x" }), PAR as never);
    if (typeof plan === "string") throw new Error(plan);
    expect(plan).toMatchObject({ count: 2, names: ["crm", "billing"], concurrency: 2, tolerated: 0 });
    expect(plan.input(1)).toEqual({ who: "x" });
    const lenient = fanOutOf(runOf({ ...PAR, on_error: "continue" }, {}), { ...PAR, on_error: "continue" } as never);
    expect(lenient).toMatchObject({ tolerated: 2 });
    const child = fanChild(runOf(PAR, {}), PAR as never, 1, {}, T0);
    expect(child.definition).toEqual([{ ...INNER, id: "b" }]);
  });

  it("give an output by branch name, a branch never started shown cancelled", () => {
    const out = parallelOutput(["crm", "billing"], [{ id: "run_1", index: 0, status: "succeeded", output: 5 }]);
    expect(out).toEqual({
      crm: { run_id: "run_1", status: "succeeded", output: 5 },
      billing: { run_id: null, status: "cancelled", output: null },
    });
  });

  it("fail the step naming each branch that ended badly, in branch order", () => {
    const names = ["crm", "billing", "audit"];
    expect(branchesFailed(names, [{ index: 1, status: "failed" }])).toBe("the branch 'billing' failed");
    expect(
      branchesFailed(names, [
        { index: 2, status: "cancelled" },
        { index: 0, status: "failed" },
      ]),
    ).toBe("the branches 'crm' failed, 'audit' was cancelled");
    // With on_error continue, read from the output once every branch ended: the succeeded ones are left out.
    const out = parallelOutput(names, [
      { id: "run_1", index: 0, status: "succeeded", output: 1 },
      { id: "run_2", index: 1, status: "failed", output: null },
      { id: "run_3", index: 2, status: "succeeded", output: 3 },
    ]);
    expect(branchesFailed(names, branchesOf(names, out))).toBe("the branch 'billing' failed");
    expect(branchesFailed(names, [])).toBe("a branch failed or was cancelled");
  });
});
