import {
  childDeferred,
  childInputFault,
  childEnded,
  childKey,
  childOf,
  childRefused,
  childStarted,
  mayHaveChildren,
  nestingFault,
  pastTimeout,
  childTimedOut,
} from "../../../../services/workflows/child-runs.logic";
import { MAX_NESTING } from "../../../../services/workflows/child-limits";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { storedAfter } from "../../../../services/workflows/run-write.logic";
import { newRun } from "../../../../services/workflows/runs.logic";
import { nextMove } from "../../../../services/workflows/run-moves.logic";
import type { Step } from "../../../../services/workflows/workflows.logic";
import { at, claimed, T0, workflow } from "./run-fixtures";

const CALL: Step = { id: "charge", type: "run_workflow", workflow_id: "wf_child", input: { n: "{{ input.n }}" }, wait: true };
const AFTER: Step = { id: "after", type: "set", output: 1 };
const parentOf = (steps: Step[] = [CALL, AFTER]): RunDoc => claimed(newRun(workflow(steps), { n: 2 }, { type: "manual" }, T0));
const child = (parent: RunDoc, change: Partial<RunDoc> = {}): RunDoc => ({
  ...childOf({ ...workflow([AFTER]), id: "wf_child" }, parent, { n: 2 }, T0),
  ...change,
});

describe("a run_workflow step", () => {
  it("is the engine's to take further: a child move", () => {
    expect(nextMove(parentOf(), at(T0))).toEqual({ kind: "child" });
  });

  it("makes a child keyed by parent, step, index and attempt, one level deeper, under the same root", () => {
    const parent = parentOf();
    const kid = child(parent);
    expect(kid).toMatchObject({
      parent: { run_id: parent.id, step_id: "charge", index: 0 },
      trigger: { type: "parent" },
      trigger_key: `parent/${parent.id}/charge/0/1`,
      root_run_id: parent.id,
      depth: 1,
      wakes_parent_at: 0,
      status: "queued",
    });
    expect(childKey({ ...parent, attempt: 2 }, "charge", 0)).toBe(`parent/${parent.id}/charge/0/2`);
    const grandchild = childOf(workflow([AFTER]), kid, {}, T0);
    expect(grandchild).toMatchObject({ root_run_id: parent.id, depth: 2 });
    expect(child(parentOf([{ ...CALL, wait: false } as Step])).wakes_parent_at).toBeUndefined();
  });

  it("refuses a child deeper than MAX_NESTING", () => {
    expect(nestingFault({ ...parentOf(), depth: MAX_NESTING - 1 })).toBeNull();
    expect(nestingFault({ ...parentOf(), depth: MAX_NESTING })).toMatch(/at most 5 levels deep \(MAX_NESTING\)/);
  });

  it("waits parked (no due time, no claim) for a child that has not ended", () => {
    const parent = parentOf();
    const kid = child(parent);
    const write = childStarted(parent, kid, at(T0));
    expect(write.released).toBe(true);
    expect(write.unset).toMatchObject({ due_at: true, lease: true });
    const waiting = storedAfter(parent, write);
    expect(waiting.status).toBe("waiting");
    expect(waiting.steps[0]).toMatchObject({ status: "waiting", output: { run_id: kid.id }, attempt_count: 1 });
  });

  it("with timeout_ms, is due when it times out, and then fails with timed_out", () => {
    const parent = parentOf([{ ...CALL, timeout_ms: 2_000 } as Step, AFTER]);
    const kid = child(parent);
    const write = childStarted(parent, kid, at(T0));
    expect(write.set.due_at).toBe(T0 + 2_000);
    const waiting = storedAfter(parent, write);
    expect(pastTimeout(waiting, at(T0 + 1_999))).toBe(false);
    expect(pastTimeout(waiting, at(T0 + 2_000))).toBe(true);
    // Waiting again (woken early) keeps the first time-out.
    expect(childStarted(waiting, kid, at(T0 + 500)).set.due_at).toBe(T0 + 2_000);
    // A child that ends in time takes the time-out with it (a retry of the run then waits afresh).
    expect(storedAfter(waiting, childEnded(waiting, { ...kid, status: "failed" }, at(T0 + 100))).steps[0].timeout_at).toBeNull();
    const failed = storedAfter(waiting, childTimedOut(waiting, { ...kid, status: "cancelled" }, at(T0 + 2_000)));
    expect(failed.steps[0]).toMatchObject({ status: "failed", error_code: "timed_out", timeout_at: null });
    expect(nextMove(waiting, at(T0 + 2_000))).toEqual({ kind: "child" });
  });

  it("keeps a run's time limit while it waits", () => {
    const parent = { ...parentOf(), deadline_at: T0 + 9_000 };
    expect(childStarted(parent, child(parent), at(T0)).set.due_at).toBe(T0 + 9_000);
  });

  it("with wait false goes on at once with the child's id", () => {
    const parent = parentOf([{ ...CALL, wait: false } as Step, AFTER]);
    const kid = child(parent);
    const next = storedAfter(parent, childStarted(parent, kid, at(T0)));
    expect(next.cursor).toBe(1);
    expect(next.steps[0]).toMatchObject({ status: "succeeded", output: { run_id: kid.id } });
  });

  it("succeeds with the child's output once the child succeeded", () => {
    const parent = parentOf();
    const kid = child(parent, { status: "succeeded", output: { total: 10 } });
    const next = storedAfter(parent, childStarted(parent, kid, at(T0)));
    expect(next.steps[0]).toMatchObject({ status: "succeeded", output: { run_id: kid.id, status: "succeeded", output: { total: 10 } } });
  });

  it("fails as the child did, naming its step, or continues under on_error", () => {
    const parent = parentOf();
    const steps = [{ ...child(parent).steps[0], status: "failed" as const, error: "boom" }];
    const kid = child(parent, { status: "failed", steps });
    const failed = storedAfter(parent, childEnded(parent, kid, at(T0)));
    expect(failed.status).toBe("failed");
    expect(failed.steps[0]).toMatchObject({
      error_code: "child_failed",
      error: `the child run ${kid.id} failed at its step 'after': boom`,
    });
    const lenient = parentOf([{ ...CALL, on_error: "continue" }, AFTER]);
    const went = storedAfter(lenient, childEnded(lenient, kid, at(T0)));
    expect(went).toMatchObject({ status: "running", cursor: 1 });
    const cancelled = storedAfter(parent, childEnded(parent, child(parent, { status: "cancelled" }), at(T0)));
    expect(cancelled.steps[0].error_code).toBe("child_cancelled");
  });

  it("fails with the code given when refused, and waits for the next minute when the starts are spent", () => {
    const parent = parentOf();
    expect(storedAfter(parent, childRefused(parent, "limit reached", at(T0), "limit_reached")).steps[0]).toMatchObject({
      status: "failed",
      error_code: "limit_reached",
    });
    const later = childDeferred(parent, at(T0), T0 + 60_000);
    expect(later).toMatchObject({ released: true, set: { due_at: T0 + 60_000 } });
  });

  it("holds a child's filled input to what a run's input may be", () => {
    expect(childInputFault({ a: 1 })).toBeNull();
    expect(childInputFault([1])).toMatch(/must be an object/);
    expect(childInputFault({ s: "x".repeat(64 * 1024) })).toMatch(/over 65536 bytes as JSON/);
    let deep: unknown = 1;
    for (let i = 0; i < 100; i += 1) deep = [deep];
    expect(childInputFault({ deep })).toMatch(/nested deeper than/);
  });

  it("has children to cancel only when it failed or was cancelled with a run_workflow step", () => {
    expect(mayHaveChildren({ ...parentOf(), status: "failed" })).toBe(true);
    expect(mayHaveChildren({ ...parentOf(), status: "succeeded" })).toBe(false);
    expect(mayHaveChildren({ ...parentOf([AFTER]), status: "cancelled" })).toBe(false);
  });
});
