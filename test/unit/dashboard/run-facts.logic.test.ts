import fc from "fast-check";
import {
  attemptRowsOf,
  definitionsOf,
  durationText,
  failedStepOf,
  skipReasonOf,
  stepsOfRun,
  stopStepOf,
  timedOutOf,
  waitingOf,
} from "../../../dashboard/src/pages/workflows/run-facts.logic";
import type { Run, RunStep, Step } from "../../../shared/api/wire";

const T = "2026-11-27T10:00:00.000Z";
const step = (id: string, over: Partial<RunStep> = {}): RunStep => ({
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
const run = (status: Run["status"], steps: RunStep[], over: Partial<Run> = {}) => ({
  status,
  steps,
  deadline_at: null,
  timeout_ms: null,
  ...over,
});

describe("durationText", () => {
  it.each([
    [1, "1 ms"],
    [999, "999 ms"],
    [1000, "1 s"],
    [1500, "1.5 s"],
    [12_400, "12 s"],
    [60_000, "1 min"],
    [125_000, "2 min 5 s"],
    [3_600_000, "1 h"],
    [12_000_000, "3 h 20 min"],
    [187_200_000, "2 d 4 h"],
  ])("%i ms reads %s", (ms, text) => expect(durationText(ms)).toBe(text));

  it("reads every duration up to 30 days as one or two whole units", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 30 * 86_400_000 }), (ms) =>
        /^\d+(\.\d)? (ms|s|min|h|d)( \d+ (s|min|h))?$/.test(durationText(ms)),
      ),
    );
  });
});

describe("why a step was skipped", () => {
  const defs = definitionsOf([{ id: "review", type: "approval", message: null, if: "input.amount >= 500" } as Step]);

  it("a step passed over by its condition has a finish time, and shows the condition", () => {
    const r = run("succeeded", [step("review", { status: "skipped", started_at: null })]);
    expect(skipReasonOf(r, r.steps[0], defs.get("review"))).toEqual({ kind: "condition", condition: "input.amount >= 500" });
    expect(skipReasonOf(r, r.steps[0], undefined)).toEqual({ kind: "condition", condition: null });
  });

  it("a step after the one the run ended at has none, and names that step", () => {
    const stopped = run("failed", [
      step("halt", { type: "stop", status: "failed", error_code: "stopped" }),
      step("pay", { status: "skipped", started_at: null, finished_at: null }),
    ]);
    expect(skipReasonOf(stopped, stopped.steps[1], undefined)).toEqual({ kind: "not_reached", at: "halt" });
    const failed = run("failed", [step("a", { status: "failed" }), step("b", { status: "skipped", started_at: null, finished_at: null })]);
    expect(skipReasonOf(failed, failed.steps[1], undefined)).toEqual({ kind: "not_reached", at: "a" });
    expect(skipReasonOf(failed, failed.steps[0], undefined)).toBeNull();
  });
});

describe("how a run ended", () => {
  it("a failed run's failed step is the last that failed (one let through by on_error: continue comes before it)", () => {
    const r = run("failed", [step("soft", { status: "failed" }), step("hard", { status: "failed" })]);
    expect(failedStepOf(r)?.id).toBe("hard");
    expect(failedStepOf({ ...r, status: "succeeded" })).toBeNull();
  });

  it("a stop step ends the run whichever status it gives it; one never reached did not", () => {
    expect(stopStepOf(run("succeeded", [step("done", { type: "stop" })]))?.id).toBe("done");
    expect(stopStepOf(run("failed", [step("a", { status: "failed" }), step("done", { type: "stop", status: "skipped" })]))).toBeNull();
  });

  it("tells the run's time-out (with its deadline) from an approval's", () => {
    const r = run(
      "failed",
      [
        step("gate", { type: "approval", status: "failed", error_code: "timed_out" }),
        step("nap", { status: "failed", error_code: "run_timed_out" }),
      ],
      {
        deadline_at: T,
        timeout_ms: 5,
      },
    );
    expect(timedOutOf(r).map((t) => [t.kind, t.step.id, t.kind === "run" && t.deadline])).toEqual([
      ["approval", "gate", false],
      ["run", "nap", T],
    ]);
  });
});

describe("until when a run waits", () => {
  const later = "2026-11-27T11:00:00.000Z";
  it("a delay until its start plus its duration; the run's deadline only when it comes first", () => {
    const defs = definitionsOf([{ id: "nap", type: "delay", duration_ms: 3_600_000 }]);
    const r = run("waiting", [step("nap", { type: "delay", status: "waiting", finished_at: null })]);
    expect(waitingOf(r, defs)).toMatchObject({ until: later, deadline: null });
    expect(waitingOf({ ...r, deadline_at: "2026-11-27T10:30:00.000Z" }, defs)?.deadline).toBe("2026-11-27T10:30:00.000Z");
    expect(waitingOf({ ...r, deadline_at: "2026-11-27T12:00:00.000Z" }, defs)?.deadline).toBeNull();
    expect(waitingOf({ ...r, status: "running" }, defs)).toBeNull();
  });

  it("an approval until its time-out, or with none until someone decides", () => {
    const r = run("waiting", [step("gate", { type: "approval", status: "waiting", finished_at: null, timeout_at: later })]);
    expect(waitingOf(r, new Map())).toMatchObject({ until: later, deadline: null });
    const open = run("waiting", [step("gate", { type: "approval", status: "waiting", finished_at: null })], { deadline_at: later });
    expect(waitingOf(open, new Map())).toMatchObject({ until: null, deadline: later });
  });

  it("a wait for an event until its time-out", () => {
    const waiting_for = { event_type: "payment.succeeded", match: { "data.order_id": "o1" } };
    const r = run("waiting", [
      step("pay", { type: "wait_for_event", status: "waiting", finished_at: null, timeout_at: later, waiting_for }),
    ]);
    expect(waitingOf(r, new Map())).toMatchObject({ until: later, step: { waiting_for } });
  });
});

describe("an http step's attempts", () => {
  it("each with how long it took and the wait since the attempt before it, unknown when that one is no longer kept", () => {
    const rows = attemptRowsOf([
      {
        attempt: 4,
        started_at: "2026-11-27T10:00:00.000Z",
        finished_at: "2026-11-27T10:00:00.040Z",
        status_code: 503,
        error: "the server answered 503",
      },
      { attempt: 5, started_at: "2026-11-27T10:00:01.040Z", finished_at: "2026-11-27T10:00:01.050Z", status_code: 200, error: null },
    ]);
    expect(rows.map((r) => [r.attempt, r.tookMs, r.waitedMs])).toEqual([
      [4, 40, null],
      [5, 10, 1000],
    ]);
    expect(attemptRowsOf(undefined)).toEqual([]);
  });
});

describe("the steps a run follows", () => {
  const defs = [
    { id: "a", type: "set", output: 1 },
    {
      id: "both",
      type: "parallel",
      branches: { crm: [{ id: "contact", type: "set", output: 1 }], billing: [{ id: "account", type: "set", output: 1 }] },
    },
    { id: "each", type: "map", items: "[]", max_concurrency: 1, tolerated_failures: 0, steps: [{ id: "one", type: "set", output: 1 }] },
  ] as Step[];
  const parent = (step_id: string, index: number) => ({ run_id: "run_p", step_id, index });

  it("is the top level for a run of the workflow itself", () => {
    expect(stepsOfRun(defs, { steps: [step("a"), step("both"), step("each")], parent: null })).toBe(defs);
  });

  it("is the branch's or the map's list for their children, which run the parent's version", () => {
    expect(stepsOfRun(defs, { steps: [step("account")], parent: parent("both", 1) })?.map((s) => s.id)).toEqual(["account"]);
    expect(stepsOfRun(defs, { steps: [step("one")], parent: parent("each", 7) })?.map((s) => s.id)).toEqual(["one"]);
  });

  it("is none when no list matches the run's steps, or the version is not kept", () => {
    expect(stepsOfRun(defs, { steps: [step("contact")], parent: parent("both", 1) })).toBeUndefined();
    expect(stepsOfRun(defs, { steps: [step("a")], parent: null })).toBeUndefined();
    expect(stepsOfRun(undefined, { steps: [step("a")], parent: null })).toBeUndefined();
  });
});
