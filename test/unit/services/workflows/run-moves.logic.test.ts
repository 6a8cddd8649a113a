import { giveUp, handBack, MAX_STALLS, nextMove } from "../../../../services/workflows/run-moves.logic";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { storedAfter as apply } from "../../../../services/workflows/run-write.logic";
import { advance, fail, newRun, wait } from "../../../../services/workflows/runs.logic";
import { at, claimed, MARGIN, STEPS, T0, waitingForApproval, workflow, writeOf } from "./run-fixtures";

/** The engine's moves other than a step's: hand back, the end past the last step, giving a run up. */
describe("the engine's other writes", () => {
  const run = claimed(newRun(workflow(), {}, { type: "manual" }, T0));

  it("a stopping engine hands the run back, due now", () => {
    const write = handBack(run, at(T0 + 3));
    expect(write).toMatchObject({ released: true, set: { due_at: T0 + 3, rev: 1 }, unset: { stalls: true, lease: true } });
  });

  it("advance, wait and fail answer the same writes the moves do", () => {
    expect(advance(run, { output: 1 }, at(T0)).set).toMatchObject({ cursor: 1, status: "running" });
    expect(wait(run, at(T0), T0 + 9).set.due_at).toBe(T0 + 9);
    expect(fail(run, "no", at(T0)).set.status).toBe("failed");
  });

  it("a run with no step left succeeds", () => {
    const past = { ...run, cursor: STEPS.length, status: "running" as const };
    expect(apply(past, writeOf(nextMove(past, at(T0)))).status).toBe("succeeded");
  });
});

describe("giving a run up after MAX_STALLS claims that stored nothing", () => {
  it("a run stalled at an http step fails there, saying why", () => {
    const run = { ...claimed(newRun(workflow(), {}, { type: "manual" }, T0)), stalls: MAX_STALLS + 1 };
    const { write, dropped, why } = giveUp(run, at(T0));
    expect(dropped).toEqual([]);
    expect(why).toMatch(/^the run stopped: its progress could not be stored in 3 tries in a row/);
    const after = apply(run, write);
    expect(after).toMatchObject({ status: "failed", lease: "L1" });
    expect(after.stalls).toBeUndefined();
    expect(after.steps[0].error).toBe(why);
  });

  it("an event that could not be stored is dropped and the run fails at the step that emitted it", () => {
    const lost = { id: "evt_lost", type: "order.done", data: {} };
    const run: RunDoc = { ...claimed(newRun(workflow(), {}, { type: "manual" }, T0)), status: "succeeded", cursor: 4, outbox: [lost] };
    run.steps = run.steps.map((s, i) => ({ ...s, status: "succeeded", output: i === 3 ? { event_id: "evt_lost" } : null }));
    const { write, dropped, why } = giveUp(run, at(T0));
    expect(dropped).toEqual([lost]);
    expect(why).toBe("the event order.done (evt_lost) could not be stored in 3 tries in a row; given up");
    const after = apply(run, write);
    expect(after.status).toBe("failed");
    expect(after.steps[3]).toMatchObject({ status: "failed", error: why });
    expect(after.outbox.map((e) => e.type)).toEqual(["workflow.completed"]);
  });

  it("a run waiting for approval keeps its state; its unpublished event is dropped and it is parked", () => {
    const requested = { id: "evt_r", type: "approval.requested", data: {} };
    const run = { ...waitingForApproval(), lease: "L1", outbox: [requested] };
    const { write, dropped, why } = giveUp(run, at(T0));
    expect([dropped, why]).toEqual([[requested], null]);
    const after = apply(run, write);
    expect(after).toMatchObject({ status: "waiting", outbox: [] });
    expect(after.due_at).toBeUndefined();
  });
});

describe("an http attempt after a claim", () => {
  it("is made once the stored claim covers the request's time-out, not before", () => {
    // Shown running by the node that claimed it first, then claimed again: the claim covers MARGIN only.
    const timeout = 10_000;
    const steps = [{ ...STEPS[0], timeout_ms: timeout } as (typeof STEPS)[number]];
    const started = claimed(newRun(workflow(steps), {}, { type: "manual" }, T0));
    const running = apply(started, writeOf(nextMove(started, at(T0))));
    expect(running.steps[0].status).toBe("running");
    const reclaimed = { ...running, lease: "L2", due_at: T0 + 60_000 + MARGIN };
    const first = nextMove(reclaimed, at(T0 + 60_000));
    expect(first.kind).toBe("write");
    const covered = apply(reclaimed, writeOf(first));
    expect(covered.due_at).toBe(T0 + 60_000 + timeout + MARGIN);
    expect(covered.stalls).toBe(reclaimed.stalls);
    expect(nextMove(covered, at(T0 + 60_010)).kind).toBe("call");
  });
});
