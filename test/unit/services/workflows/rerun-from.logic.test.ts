import fc from "fast-check";
import { rerunFrom } from "../../../../services/workflows/rerun-from.logic";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { newRun } from "../../../../services/workflows/runs.logic";
import { iso, T0, workflow } from "./run-fixtures";

/** A run of the fixture workflow that ended failed at step `failedAt`, the steps before it succeeded with outputs. */
function endedRun(failedAt: number): RunDoc {
  const run = newRun(workflow(), { order: "o1" }, { type: "manual" }, T0);
  const steps = run.steps.map((s, i) => {
    if (i < failedAt)
      return { ...s, status: "succeeded" as const, output: { n: i }, attempt_count: 1, started_at: iso(T0), finished_at: iso(T0) };
    if (i === failedAt) return { ...s, status: "failed" as const, error: "HTTP 500", attempt_count: 3 };
    return { ...s, status: "skipped" as const };
  });
  return { ...run, status: "failed", steps, finished_at: iso(T0 + 1), cursor: failedAt };
}

describe("rerun from a step", () => {
  const ids = workflow().steps.map((s) => s.id);

  it("copies the steps before from_step with their outputs, marked copied_from, and starts there", () => {
    const old = endedRun(2);
    const run = rerunFrom(workflow(), old, T0 + 5, { fromStep: ids[2] });
    expect(run).toMatchObject({ status: "queued", cursor: 2, rerun_of: old.id, input: { order: "o1" }, due_at: T0 + 5 });
    expect(run.id).not.toBe(old.id);
    expect(run.steps.slice(0, 2)).toEqual(old.steps.slice(0, 2).map((s) => ({ ...s, copied_from: old.id })));
    expect(run.steps.slice(2).map((s) => [s.status, s.output, s.copied_from])).toEqual(
      run.steps.slice(2).map(() => ["pending", null, undefined]),
    );
  });

  it("takes a new input, or the old run's", () => {
    const old = endedRun(1);
    expect(rerunFrom(workflow(), old, T0, { fromStep: ids[1], input: { order: "o2" } }).input).toEqual({ order: "o2" });
    expect(rerunFrom(workflow(), old, T0, {}).input).toEqual({ order: "o1" });
    expect(rerunFrom(workflow(), old, T0, {}).cursor).toBe(0);
  });

  it("refuses a step the workflow lacks, and a step whose earlier steps did not succeed in the old run", () => {
    const old = endedRun(1);
    expect(() => rerunFrom(workflow(), old, T0, { fromStep: "nope" })).toThrow(
      expect.objectContaining({ type: "invalid_state", data: { param: "from_step" } }),
    );
    // Step 1 failed in the old run: nothing to copy for it.
    expect(() => rerunFrom(workflow(), old, T0, { fromStep: ids[2] })).toThrow(
      expect.objectContaining({ type: "invalid_state", data: { param: "from_step" } }),
    );
    // A step added before from_step since the old run: it has no result to copy.
    const grown = workflow([{ ...workflow().steps[0], id: "added" }, ...workflow().steps]);
    expect(() => rerunFrom(grown, endedRun(3), T0, { fromStep: ids[1] })).toThrow(/'added'.*did not exist/);
  });

  it("needs the old run ended", () => {
    expect(() => rerunFrom(workflow(), { ...endedRun(1), status: "waiting" }, T0, { fromStep: ids[1] })).toThrow(
      /Only a run that has ended/,
    );
  });
});

describe("rerun from a step, any step of any run that failed", () => {
  it("copies exactly the steps before from_step and starts there, or refuses naming from_step", () => {
    const ids = workflow().steps.map((s) => s.id);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: ids.length - 1 }), fc.integer({ min: 0, max: ids.length - 1 }), (failedAt, from) => {
        const old = endedRun(failedAt);
        if (from > failedAt) {
          // The step that failed in the old run comes before from_step: nothing to copy for it.
          expect(() => rerunFrom(workflow(), old, T0, { fromStep: ids[from] })).toThrow(
            expect.objectContaining({ type: "invalid_state", data: { param: "from_step" } }),
          );
          return;
        }
        const run = rerunFrom(workflow(), old, T0, { fromStep: ids[from] });
        expect(run.cursor).toBe(from);
        expect(run.steps.map((s) => s.copied_from ?? null)).toEqual(ids.map((_, i) => (i < from ? old.id : null)));
        expect(run.steps.slice(from).every((s) => s.status === "pending")).toBe(true);
      }),
    );
  });
});
