import { cutAnswer } from "../../../../services/workflows/outputs";
import { attempted } from "../../../../services/workflows/http-step.logic";
import { retryDelay } from "../../../../services/workflows/retry.logic";
import { approve, reject, rerun, retry } from "../../../../services/workflows/run-decisions.logic";
import { claim, claimedAtStart, nextMove, published } from "../../../../services/workflows/run-moves.logic";
import { runView } from "../../../../services/workflows/run-view.logic";
import { storedAfter as apply, updateOf } from "../../../../services/workflows/run-write.logic";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { finish, newRun } from "../../../../services/workflows/runs.logic";
import type { Step } from "../../../../services/workflows/workflows.logic";

/**
 * The run state machine as pure functions: each transition answers one write (what it sets and
 * removes, revision, due time and lease included, and the events it queues), applied here the way
 * the store applies it.
 */
import { ANN, at, claimed, iso, MARGIN, STEPS, T0, waitingForApproval, workflow, writeOf } from "./run-fixtures";

describe("start", () => {
  it("a new run is queued and due now, at revision 0, every step pending, the steps kept as they were", () => {
    const run = newRun(workflow(), { order: "o1" }, { type: "manual" }, T0);
    expect(run).toMatchObject({ status: "queued", rev: 0, cursor: 0, due_at: T0, outbox: [], workflow_version: 3, created_at: iso(T0) });
    expect(run.steps.map((s) => s.status)).toEqual(["pending", "pending", "pending", "pending"]);
    expect(run.definition).toEqual(STEPS);
    expect(run.lease).toBeUndefined();
    expect(run.trigger_key).toBeUndefined();
  });

  it("an event-started run carries its trigger key and its place in the chain", () => {
    const run = newRun(workflow(), {}, { type: "event", event_id: "evt_9", event_type: "x.y" }, T0, 2, "evt_1");
    expect(run).toMatchObject({ trigger_key: "wf_1/evt_9", chain_depth: 2, chain_root: "evt_1" });
  });

  it("a claim takes the lease for the margin and counts a stall", () => {
    expect(claim("L1", at(T0))).toEqual({ $set: { due_at: T0 + MARGIN, lease: "L1" }, $inc: { stalls: 1 } });
  });

  it("a run stored already claimed is what a claim and the engine's first write would leave: an http step shown running", () => {
    const run = newRun(workflow(), { order: "o1" }, { type: "manual" }, T0);
    const stored = claimedAtStart(run, "L1", at(T0 + 7));
    const claimedOnly = { ...run, lease: "L1", stalls: 1, due_at: T0 + 7 + MARGIN };
    expect(stored).toEqual(apply(claimedOnly, writeOf(nextMove(claimedOnly, at(T0 + 7)))));
    expect(stored).toMatchObject({ status: "running", rev: 1, lease: "L1", stalls: 1, due_at: T0 + 7 + 2_000 + MARGIN });
    expect(stored.steps[0]).toMatchObject({ status: "running", started_at: iso(T0 + 7) });
    // The engine goes on from it with the request.
    expect(nextMove(stored, at(T0 + 8)).kind).toBe("call");
  });

  it("a run stored already claimed whose first step publishes or waits is stored as claimed, queued", () => {
    for (const first of [STEPS[1], STEPS[2], STEPS[3]]) {
      const run = newRun(workflow([first]), {}, { type: "manual" }, T0);
      expect(claimedAtStart(run, "L1", at(T0))).toEqual({ ...run, lease: "L1", stalls: 1, due_at: T0 + MARGIN });
    }
  });
});

describe("an http step", () => {
  const run = claimed(newRun(workflow(), { order: "o1", n: 2 }, { type: "manual" }, T0));

  it("is shown running before its request leaves, under the claim extended by the step's timeout; not progress", () => {
    const write = writeOf(nextMove(run, at(T0 + 10)));
    expect(write.set).toMatchObject({ status: "running", rev: 1, updated_at: iso(T0 + 10), due_at: T0 + 10 + 2_000 + MARGIN });
    expect(write.set.steps![0]).toMatchObject({ status: "running", started_at: iso(T0 + 10) });
    expect(write.unset).toEqual({});
    expect(write.released).toBe(false);
    expect(updateOf(write)).not.toHaveProperty("$unset");
  });

  it("then its request is made, its fields filled from the input", () => {
    const running = apply(run, writeOf(nextMove(run, at(T0))));
    expect(nextMove(running, at(T0 + 1))).toEqual({
      kind: "call",
      request: {
        url: "https://example.com/orders/o1",
        method: "POST",
        headers: { "x-order": "o1", "content-type": "application/json", "user-agent": "wfp-workflows/1" },
        body: '{"n":2}',
        timeoutMs: 2_000,
      },
    });
  });

  const running = apply(run, writeOf(nextMove(run, at(T0))));

  it("advance: an attempt that succeeded moves the run on, under the claim, and resets the stalls", () => {
    const write = attempted(running, { ok: true, output: { status_code: 200, body: { ref: "R-1" } }, error: null }, at(T0 + 50), 1_000);
    const after = apply(running, write);
    expect(after).toMatchObject({ status: "running", cursor: 1, rev: 2, lease: "L1", due_at: T0 + 50 + MARGIN });
    expect(after.steps[0]).toMatchObject({ status: "succeeded", attempt_count: 1, error: null, finished_at: iso(T0 + 50) });
    expect(after.steps[0].output).toEqual({ status_code: 200, body: { ref: "R-1" } });
    expect(after.stalls).toBeUndefined();
    expect(write.events).toEqual([]);
  });

  it("retry: a failed attempt with retries left lets the run go, due after the back-off", () => {
    const write = attempted(
      running,
      { ok: false, output: { status_code: 503, body: "no" }, error: "the server answered 503" },
      at(T0 + 50),
      1_000,
    );
    const after = apply(running, write);
    expect(write.released).toBe(true);
    expect(after).toMatchObject({ status: "running", cursor: 0, due_at: T0 + 50 + retryDelay(1_000, 1) });
    expect(after.lease).toBeUndefined();
    expect(after.steps[0]).toMatchObject({ status: "running", attempt_count: 1, error: "the server answered 503" });
    // Due again: the same step, still running, makes its next request.
    expect(nextMove(claimed(after, "L2"), at(T0 + 2_000)).kind).toBe("call");
  });

  it("finish: out of retries, the step fails and the run with it; the steps after it are skipped and workflow.completed queued", () => {
    const retried = { ...running, steps: running.steps.map((s, i) => (i === 0 ? { ...s, attempt_count: 1 } : s)) };
    const write = attempted(retried, { ok: false, output: null, error: "timed out" }, at(T0 + 50), 1_000);
    const after = apply(retried, write);
    expect(after).toMatchObject({ status: "failed", finished_at: iso(T0 + 50), lease: "L1" });
    expect(after.steps.map((s) => s.status)).toEqual(["failed", "skipped", "skipped", "skipped"]);
    expect(after.steps[0]).toMatchObject({ attempt_count: 2, error: "timed out" });
    expect(write.events).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        type: "workflow.completed",
        data: {
          workflow_id: "wf_1",
          run_id: run.id,
          status: "failed",
          attempt: 1,
          rerun_of: null,
          approvals: [],
          failed_step: { id: "call", error: { code: "step_failed", message: "timed out" } },
          stop_message: null,
        },
      },
    ]);
    expect(after.outbox).toEqual(write.events);
    // Next: publish the outbox, then the ended run is parked (no lease, no due time).
    expect(nextMove(after, at(T0 + 60))).toEqual({ kind: "publish" });
    const parked = apply(after, published(after, at(T0 + 70)));
    expect(parked.outbox).toEqual([]);
    expect(parked.lease).toBeUndefined();
    expect(parked.due_at).toBeUndefined();
  });

  it("counts the tries of a run stored before attempts was named attempt_count, and shows it under the new name", () => {
    const legacy = {
      ...running,
      steps: running.steps.map(({ attempt_count: _c, ...s }, i) => ({ ...s, attempts: i === 0 ? 2 : 0 })),
    } as unknown as RunDoc;
    const write = attempted(legacy, { ok: false, output: null, error: "timed out" }, at(T0 + 50), 1_000);
    expect(apply(legacy, write).steps[0]).toMatchObject({ status: "failed", attempt_count: 3 });
    const view = runView(legacy);
    expect(view.steps[0]).toEqual(expect.objectContaining({ attempt_count: 2 }));
    expect(view.steps[0]).not.toHaveProperty("attempts");
    expect(view.object).toBe("run");
  });

  it("a template that reads a truncated output fails the step for good", () => {
    const wf = workflow([
      { id: "big", type: "delay", duration_ms: 1 },
      { ...(STEPS[0] as Extract<Step, { type: "http" }>), url: "https://example.com/{{steps.big.output.body.id}}" },
    ]);
    const base = claimed(newRun(wf, {}, { type: "manual" }, T0));
    const r = { ...base, cursor: 1, status: "running" as const };
    r.steps = r.steps.map((s, i) =>
      i === 0 ? { ...s, status: "succeeded" as const, output: cutAnswer(200, "x", 1 << 20) } : { ...s, status: "running" as const },
    );
    const after = apply(r, writeOf(nextMove(r, at(T0))));
    expect(after.status).toBe("failed");
    expect(after.steps[1].error).toMatch(
      /^\{\{steps\.big\.output\.body\.id\}\} reads the output of step 'big', which was not stored whole/,
    );
  });
});

describe("a delay step", () => {
  const base = claimed(newRun(workflow(), { order: "o1" }, { type: "manual" }, T0));
  const atDelay = { ...base, cursor: 1, status: "running" as const };

  it("wait: the run waits, let go, due when the delay is over", () => {
    const write = writeOf(nextMove(atDelay, at(T0)));
    const after = apply(atDelay, write);
    expect(write.released).toBe(true);
    expect(after).toMatchObject({ status: "waiting", due_at: T0 + 1_000, rev: 1 });
    expect(after.steps[1]).toMatchObject({ status: "waiting", started_at: iso(T0) });
    expect(after.lease).toBeUndefined();
  });

  it("advance: due again, the step succeeds and the run goes on to the approval", () => {
    const waiting = claimed(apply(atDelay, writeOf(nextMove(atDelay, at(T0)))), "L2");
    const after = apply(waiting, writeOf(nextMove(waiting, at(T0 + 1_000))));
    expect(after).toMatchObject({ status: "running", cursor: 2, lease: "L2", due_at: T0 + 1_000 + MARGIN });
    expect(after.steps[1]).toMatchObject({
      status: "succeeded",
      output: { waited_ms: 1_000 },
      started_at: iso(T0),
      finished_at: iso(T0 + 1_000),
    });
  });
});

describe("an approval step", () => {
  const base = claimed(newRun(workflow(), { order: "o1" }, { type: "manual" }, T0));
  const atApproval: RunDoc = { ...base, cursor: 2, status: "running" };
  atApproval.steps = atApproval.steps.map((s, i) =>
    i === 0
      ? { ...s, status: "succeeded", output: { status_code: 200, body: { ref: "R-1" } } }
      : i === 1
        ? { ...s, status: "succeeded" }
        : s,
  );

  it("wait: queues approval.requested with its message filled, keeps the claim to publish it, then parks the run", () => {
    const write = writeOf(nextMove(atApproval, at(T0)));
    expect(write.events).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        type: "approval.requested",
        data: { workflow_id: "wf_1", run_id: base.id, step_id: "ok", message: "order o1: R-1" },
      },
    ]);
    const after = apply(atApproval, write);
    expect(after).toMatchObject({ status: "waiting", lease: "L1" });
    expect(after.steps[2]).toMatchObject({ status: "waiting", message: "order o1: R-1", decision: null });
    expect(after.pending_approval).toEqual({ step_id: "ok", message: "order o1: R-1", requested_at: iso(T0) });
    expect(nextMove(after, at(T0 + 1))).toEqual({ kind: "publish" });
    const parked = apply(after, published(after, at(T0 + 2)));
    expect(parked.due_at).toBeUndefined();
    expect(parked.lease).toBeUndefined();
    expect(parked.outbox).toEqual([]);
    // Found again (a lost claim lapsing): nothing to do but let it go.
    const again = writeOf(nextMove(claimed(parked, "L3"), at(T0 + 3)));
    expect(again.released).toBe(true);
    expect(again.unset).toEqual({ stalls: true, lease: true, due_at: true });
  });

  it("a message too deep for an event fails the step", () => {
    let deep: unknown = "x";
    for (let i = 0; i < 40; i += 1) deep = { k: deep };
    const r = { ...atApproval, input: { deep }, definition: STEPS.map((s) => (s.id === "ok" ? { ...s, message: "{{input.deep}}" } : s)) };
    const after = apply(r, writeOf(nextMove(r, at(T0))));
    expect(after.status).toBe("failed");
    expect(after.steps[2].error).toMatch(/^approval\.requested: the event's data, once its templates are filled, is nested deeper/);
  });

  const waiting = waitingForApproval();

  it("approve: the step succeeds with the decision, the run goes on, due now and at the next revision; the claim goes", () => {
    const write = approve({ ...waiting, lease: "L9" }, T0 + 5, { by: ANN, comment: "fine" });
    const after = apply({ ...waiting, lease: "L9", stalls: 2 }, write);
    expect(after).toMatchObject({ status: "running", cursor: 3, rev: waiting.rev + 1, due_at: T0 + 5, updated_at: iso(T0 + 5), stalls: 2 });
    const decision = { decision: "approved", comment: "fine", decided_by: ANN, decided_at: iso(T0 + 5) };
    expect(after.steps[2]).toMatchObject({ status: "succeeded", output: { approved: true }, finished_at: iso(T0 + 5), decision });
    expect(after.pending_approval).toBeNull();
    expect(after.lease).toBeUndefined();
    expect(write.events.map((e) => [e.type, e.data])).toEqual([
      ["approval.decided", { workflow_id: "wf_1", run_id: waiting.id, step_id: "ok", ...decision }],
    ]);
  });

  it("reject: the step fails with 'rejected' and the decision, and the run ends failed; workflow.completed carries it", () => {
    const write = reject(waiting, T0 + 5, { by: ANN });
    const after = apply(waiting, write);
    expect(after).toMatchObject({ status: "failed", due_at: T0 + 5, finished_at: iso(T0 + 5), pending_approval: null });
    expect(after.steps.map((s) => s.status)).toEqual(["succeeded", "succeeded", "failed", "skipped"]);
    const decision = { decision: "rejected", comment: null, decided_by: ANN, decided_at: iso(T0 + 5) };
    expect(after.steps[2]).toMatchObject({ output: { approved: false }, error: "rejected", decision });
    expect(write.events.map((e) => [e.type, e.data.status ?? e.data.decision])).toEqual([
      ["approval.decided", "rejected"],
      ["workflow.completed", "failed"],
    ]);
    expect(write.events[1].data).toMatchObject({ attempt: 1, rerun_of: null, approvals: [{ step_id: "ok", ...decision }] });
  });

  it("a rejected run is not retried (a decision, not a fault), and can be rerun", () => {
    const rejected = apply(waiting, reject(waiting, T0 + 5, { by: ANN }));
    expect(() => retry(rejected, T0 + 6)).toThrow(
      expect.objectContaining({ type: "invalid_state", message: expect.stringMatching(/rerun it/) }),
    );
    const again = rerun(workflow(), rejected, T0 + 7);
    expect(again).toMatchObject({
      status: "queued",
      rerun_of: rejected.id,
      attempt: 1,
      input: rejected.input,
      workflow_version: workflow().version,
    });
    expect(again.id).not.toBe(rejected.id);
  });
});

describe("an emit step", () => {
  const base = claimed(newRun(workflow(), { order: "o1" }, { type: "manual" }, T0));
  const atEmit: RunDoc = { ...base, cursor: 3, status: "running" };
  atEmit.steps = atEmit.steps.map((s, i) =>
    i === 0 ? { ...s, status: "succeeded", output: { body: { ref: "R-1" } } } : i < 3 ? { ...s, status: "succeeded" } : s,
  );

  it("advance past the last step: its event and workflow.completed are queued and the run succeeds", () => {
    const write = writeOf(nextMove(atEmit, at(T0)));
    const after = apply(atEmit, write);
    expect(after).toMatchObject({ status: "succeeded", cursor: 4, finished_at: iso(T0), lease: "L1" });
    expect(write.events.map((e) => e.type)).toEqual(["order.done", "workflow.completed"]);
    expect(write.events[0].data).toEqual({ ref: "R-1" });
    expect(after.steps[3]).toMatchObject({ status: "succeeded", attempt_count: 1, output: { event_id: write.events[0].id } });
  });

  it("data too deep for an event fails the step after one attempt", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 40; i += 1) deep = [deep];
    const r = { ...atEmit, input: { deep }, definition: STEPS.map((s) => (s.id === "tell" ? { ...s, data: { d: "{{input.deep}}" } } : s)) };
    const after = apply(r, writeOf(nextMove(r, at(T0))));
    expect(after.status).toBe("failed");
    expect(after.steps[3]).toMatchObject({ status: "failed", attempt_count: 1 });
    expect(after.outbox.map((e) => e.type)).toEqual(["workflow.completed"]);
  });
});

describe("finishing a run", () => {
  const run = {
    id: "run_1",
    workflow_id: "wf_1",
    cursor: 1,
    outbox: [],
    steps: [
      { id: "a", status: "succeeded" },
      { id: "b", status: "running", started_at: "t0" },
      { id: "c", status: "pending" },
    ],
  } as unknown as RunDoc;

  it("ends the current step as told, skips the rest and queues workflow.completed", () => {
    const set = finish(run, "failed", "t1", "failed", "boom");
    expect(set.status).toBe("failed");
    expect(set.finished_at).toBe("t1");
    expect(set.steps!.map((s) => s.status)).toEqual(["succeeded", "failed", "skipped"]);
    expect(set.steps![1]).toMatchObject({ error: "boom", started_at: "t0", finished_at: "t1" });
    expect(set.outbox).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        type: "workflow.completed",
        data: {
          workflow_id: "wf_1",
          run_id: "run_1",
          status: "failed",
          attempt: 1,
          rerun_of: null,
          approvals: [],
          failed_step: { id: set.steps![1].id, error: { code: "step_failed", message: "boom" } },
          stop_message: null,
        },
      },
    ]);
  });
});
