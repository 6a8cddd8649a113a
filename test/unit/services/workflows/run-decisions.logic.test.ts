import { attempted } from "../../../../services/workflows/http-step.logic";
import { approve, cancel, MAX_RUN_RETRIES, reject, rerun, retry } from "../../../../services/workflows/run-decisions.logic";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { nextMove, published } from "../../../../services/workflows/run-moves.logic";
import { storedAfter as apply } from "../../../../services/workflows/run-write.logic";
import { newRun } from "../../../../services/workflows/runs.logic";
import { ANN, at, claimed, iso, T0, waitingForApproval, workflow } from "./run-fixtures";

/** Decisions through the API (cancel, approve, reject, retry, rerun): each answers one write, applied here as the store applies it. */
describe("cancel", () => {
  it("ends a run where it is: the current step cancelled, the rest skipped, the engine's claim taken away", () => {
    const run = claimed(newRun(workflow(), {}, { type: "manual" }, T0));
    const write = cancel(run, T0 + 7);
    const after = apply(run, write);
    expect(after).toMatchObject({ status: "cancelled", rev: 1, due_at: T0 + 7, finished_at: iso(T0 + 7) });
    expect(after.lease).toBeUndefined();
    expect(after.steps.map((s) => s.status)).toEqual(["cancelled", "skipped", "skipped", "skipped"]);
    expect(write.events.map((e) => [e.type, e.data.status])).toEqual([["workflow.completed", "cancelled"]]);
  });

  it("a waiting run can be cancelled too", () => {
    expect(apply(waitingForApproval(), cancel(waitingForApproval(), T0)).status).toBe("cancelled");
  });
});

describe("retry and rerun", () => {
  // Failed at its http step (0) after its retries; the steps after it skipped.
  const failedRun = (): RunDoc => {
    const run = { ...claimed(newRun(workflow(), { order: "o1" }, { type: "manual" }, T0)), status: "running" as const };
    run.steps = run.steps.map((s, i) => (i === 0 ? { ...s, status: "running", attempt_count: 1, started_at: iso(T0) } : s));
    const failed = apply(run, attempted(run, { ok: false, output: { status: 500 }, error: "HTTP 500" }, at(T0 + 1), 10));
    return apply(failed, published(failed, at(T0 + 2)));
  };

  it("retry: the same run goes on from its failed step, attempt 2, due now, its later steps pending again", () => {
    const failed = failedRun();
    expect(failed.status).toBe("failed");
    const write = retry(failed, T0 + 50);
    const after = apply(failed, write);
    expect(after).toMatchObject({
      id: failed.id,
      status: "queued",
      attempt: 2,
      cursor: 0,
      finished_at: null,
      due_at: T0 + 50,
      rev: failed.rev + 1,
    });
    expect(after.steps.map((s) => [s.status, s.attempt_count, s.error])).toEqual([
      ["pending", 0, null],
      ["pending", 0, null],
      ["pending", 0, null],
      ["pending", 0, null],
    ]);
    expect(after.lease).toBeUndefined();
    expect(write.unset.stalls).toBe(true);
    // The engine takes it from there: the failed step's request is made again.
    expect(nextMove(claimed(after), at(T0 + 60))).toMatchObject({ kind: "write" });
    expect(after.definition).toEqual(failed.definition);
  });

  it("a retry keeps what succeeded before the failed step", () => {
    const failed = failedRun();
    const partly: RunDoc = { ...failed, cursor: 1 };
    partly.steps = failed.steps.map((s, i) => (i === 0 ? { ...s, status: "succeeded" } : i === 1 ? { ...s, status: "failed" } : s));
    const after = apply(partly, retry(partly, T0 + 50));
    expect(after.cursor).toBe(1);
    expect(after.steps.map((s) => s.status)).toEqual(["succeeded", "pending", "pending", "pending"]);
  });

  it("only failed runs are retried, at most MAX_RUN_RETRIES times", () => {
    const failed = failedRun();
    for (const status of ["succeeded", "cancelled", "waiting", "running", "queued"] as const)
      expect(() => retry({ ...failed, status }, T0)).toThrow(expect.objectContaining({ type: "invalid_state" }));
    expect(() => retry({ ...failed, attempt: MAX_RUN_RETRIES + 1 }, T0)).toThrow(/retried 20 times/);
    expect(() => retry({ ...failed, attempt: MAX_RUN_RETRIES }, T0)).not.toThrow();
  });

  it("a rerun takes the workflow's current version and the old input, and needs the old run ended", () => {
    const failed = failedRun();
    const current = { ...workflow(), version: 3 };
    expect(rerun(current, failed, T0 + 9)).toMatchObject({
      workflow_version: 3,
      rerun_of: failed.id,
      input: { order: "o1" },
      due_at: T0 + 9,
    });
    expect(() => rerun(current, { ...failed, status: "waiting" }, T0)).toThrow(/Only a run that has ended/);
  });

  it("cancel by a key records who and why, on the run and in workflow.completed", () => {
    const run = claimed(newRun(workflow(), {}, { type: "manual" }, T0));
    const write = cancel(run, T0 + 1, { by: ANN }, "workflow_deleted");
    expect(apply(run, write)).toMatchObject({ status: "cancelled", cancelled_by: ANN, cancel_reason: "workflow_deleted" });
    expect(write.events[0].data).toMatchObject({ status: "cancelled", cancelled_by: ANN, cancel_reason: "workflow_deleted" });
  });
});

describe("decisions that do not apply", () => {
  const ended = (status: "succeeded" | "failed" | "cancelled"): RunDoc => ({ ...waitingForApproval(), status });
  const running: RunDoc = { ...claimed(newRun(workflow(), {}, { type: "manual" }, T0)), status: "running" };
  const refused = (f: () => unknown, message: string) => expect(f).toThrow(expect.objectContaining({ type: "invalid_state", message }));

  it("an ended run cannot be cancelled", () => {
    refused(() => cancel(ended("succeeded"), T0), "The run has ended (succeeded)");
    refused(() => cancel(ended("failed"), T0), "The run has ended (failed)");
    refused(() => cancel(ended("cancelled"), T0), "The run has ended (cancelled)");
  });

  it("only a run waiting at an approval step can be approved or rejected", () => {
    refused(() => approve(ended("cancelled"), T0, { by: ANN }), "The run is not waiting for approval (cancelled)");
    refused(() => reject(ended("succeeded"), T0, { by: ANN }), "The run is not waiting for approval (succeeded)");
    refused(() => approve(running, T0, { by: ANN }), "The run is not waiting for approval (running)");
    // Waiting, but at a delay step.
    const delayed: RunDoc = { ...running, status: "waiting", cursor: 1 };
    delayed.steps = delayed.steps.map((s, i) => (i === 1 ? { ...s, status: "waiting" } : s));
    refused(() => reject(delayed, T0, { by: ANN }), "The run is not waiting for approval (waiting)");
  });
});
