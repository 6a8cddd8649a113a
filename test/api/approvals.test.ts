import fc from "fast-check";
import { waitFor } from "../../tools/procs";
import { anyString } from "../helpers/odd-json";
import { api, expectError, usePlatform } from "../helpers/platform";

/**
 * The audit trail through HTTP: approvals and rejections with their comment and decider (on the
 * run, its step and the events), and who revoked a key, deleted a webhook or a workflow, or
 * changed a member's role.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RUN_STARTS_PER_MINUTE: "1000", RATE_LIMIT_MAX: "1000000" });

const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

/** A key of Acme's live environment named `name`: the actor the trail must name. */
async function keyNamed(name: string, scopes = ["workflows:read", "workflows:write", "events:read"]) {
  const res = await call("POST", "/api-keys", { name, scopes });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; key: string; name: string };
}

async function workflow(steps: unknown[]) {
  const res = await call("POST", "/workflows", { name: "approve me", trigger: { type: "manual" }, steps });
  expect(res.status).toBe(201);
  return res.body.data as { id: string };
}

async function waitingRun(wfId: string, input: Record<string, unknown>) {
  const started = await call("POST", `/workflows/${wfId}/runs`, { input });
  expect(started.status).toBe(201);
  let run: any;
  await waitFor("the run to wait for approval", async () => {
    run = (await call("GET", `/workflows/${wfId}/runs/${started.body.data.id}`)).body.data;
    return run.status === "waiting";
  });
  return run;
}

/** The events of `type` about `match` (its data's fields), once there are `n`. */
async function eventsOf(type: string, match: Record<string, unknown>, n = 1): Promise<any[]> {
  const find = async () =>
    ((await call("GET", `/events?type=${type}&per_page=100`)).body.data as any[]).filter((e) =>
      Object.entries(match).every(([k, v]) => e.data[k] === v),
    );
  await waitFor(`${n} ${type} event(s)`, async () => (await find()).length >= n);
  return find();
}

describe("approvals people can decide", () => {
  it("the message is on the run and its step; approve with a comment records the decision, its key and time everywhere", async () => {
    const ann = await keyNamed("ann");
    const wf = await workflow([
      { id: "ok", type: "approval", message: "Refund {{input.amount}} EUR to {{input.who}}?" },
      { id: "done", type: "emit", event_type: "refund.sent", data: {} },
    ]);
    const waiting = await waitingRun(wf.id, { amount: 40, who: "Bo" });
    expect(waiting.pending_approval).toEqual({ step_id: "ok", message: "Refund 40 EUR to Bo?", requested_at: expect.any(String) });
    expect(waiting.steps[0]).toMatchObject({ status: "waiting", message: "Refund 40 EUR to Bo?", decision: null });

    const res = await call("POST", `/workflows/${wf.id}/runs/${waiting.id}/approve`, { comment: "  checked the invoice " }, ann.key);
    expect(res.status).toBe(200);
    const decision = {
      decision: "approved",
      comment: "checked the invoice",
      decided_by: { key_id: ann.id, key_name: "ann" },
      decided_at: expect.any(String),
    };
    expect(res.body.data.steps[0]).toMatchObject({ status: "succeeded", message: "Refund 40 EUR to Bo?", decision });
    expect(res.body.data.pending_approval).toBeNull();

    const [decided] = await eventsOf("approval.decided", { run_id: waiting.id });
    expect(decided.data).toEqual({ workflow_id: wf.id, run_id: waiting.id, step_id: "ok", ...decision });
    const [completed] = await eventsOf("workflow.completed", { run_id: waiting.id });
    expect(completed.data).toEqual({
      workflow_id: wf.id,
      run_id: waiting.id,
      status: "succeeded",
      attempt: 1,
      rerun_of: null,
      approvals: [{ step_id: "ok", ...decision, decided_at: decided.data.decided_at }],
      failed_step: null,
      stop_message: null,
    });
    const run = (await call("GET", `/workflows/${wf.id}/runs/${waiting.id}`)).body.data;
    expect(run.steps[0].decision).toEqual({ ...decision, decided_at: decided.data.decided_at });
  });

  it("reject with a comment: the run fails with the decision on its step and in workflow.completed; no comment is null", async () => {
    const bob = await keyNamed("bob");
    const wf = await workflow([{ id: "gate", type: "approval", message: null }]);
    const first = await waitingRun(wf.id, {});
    expect(first.pending_approval).toMatchObject({ step_id: "gate", message: null });
    const res = await call("POST", `/workflows/${wf.id}/runs/${first.id}/reject`, { comment: "not this week" }, bob.key);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: "failed", pending_approval: null });
    expect(res.body.data.steps[0]).toMatchObject({
      status: "failed",
      error: "rejected",
      decision: { decision: "rejected", comment: "not this week", decided_by: { key_id: bob.id, key_name: "bob" } },
    });
    const [completed] = await eventsOf("workflow.completed", { run_id: first.id });
    expect(completed.data).toMatchObject({
      status: "failed",
      approvals: [{ step_id: "gate", decision: "rejected", comment: "not this week" }],
    });

    const second = await waitingRun(wf.id, {});
    const plain = await call("POST", `/workflows/${wf.id}/runs/${second.id}/approve`, undefined, bob.key);
    expect(plain.body.data.steps[0].decision).toMatchObject({ decision: "approved", comment: null });
  });

  it("a comment over 1000 characters, or not text, is a 400 and decides nothing", async () => {
    const wf = await workflow([{ type: "approval", message: "go?" }]);
    const run = await waitingRun(wf.id, {});
    expectError(
      await call("POST", `/workflows/${wf.id}/runs/${run.id}/approve`, { comment: "x".repeat(1001) }),
      400,
      "parameter_invalid",
      "comment",
    );
    expectError(
      await call("POST", `/workflows/${wf.id}/runs/${run.id}/reject`, { comment: { a: 1 } }),
      400,
      "parameter_invalid",
      "comment",
    );
    expectError(await call("POST", `/workflows/${wf.id}/runs/${run.id}/approve`, { reason: "x" }), 400, "parameter_unknown");
    const still = (await call("GET", `/workflows/${wf.id}/runs/${run.id}`)).body.data;
    expect(still).toMatchObject({ status: "waiting", steps: [{ status: "waiting", decision: null }] });
    expect((await call("POST", `/workflows/${wf.id}/runs/${run.id}/approve`, { comment: "x".repeat(1000) })).status).toBe(200);
  });
});

describe("comments of any text", () => {
  it("keeps a generated comment (NUL, line separators, BOM, astral and binary characters) exactly, trimmed, on the step and in approval.decided", async () => {
    const wf = await workflow([{ id: "ok", type: "approval", message: "ok?" }]);
    await fc.assert(
      fc.asyncProperty(anyString, async (comment) => {
        const waiting = await waitingRun(wf.id, {});
        const res = await call("POST", `/workflows/${wf.id}/runs/${waiting.id}/approve`, { comment });
        expect(res.status).toBe(200);
        // Trimmed; one that trims to nothing is no comment.
        const stored = comment.trim() === "" ? null : comment.trim();
        const read = (await call("GET", `/workflows/${wf.id}/runs/${waiting.id}`)).body.data;
        expect(read.steps[0].decision.comment).toBe(stored);
        const [decided] = await eventsOf("approval.decided", { run_id: waiting.id });
        expect(decided.data.comment).toBe(stored);
      }),
      { numRuns: 12 },
    );
  });
});

describe("actors on what keys change", () => {
  it("a cancelled run says which key cancelled it, on the run and in workflow.completed", async () => {
    const dan = await keyNamed("dan");
    const wf = await workflow([{ type: "approval", message: "wait" }]);
    const run = await waitingRun(wf.id, {});
    const res = await call("POST", `/workflows/${wf.id}/runs/${run.id}/cancel`, undefined, dan.key);
    expect(res.status).toBe(200);
    const by = { key_id: dan.id, key_name: "dan" };
    expect(res.body.data).toMatchObject({ status: "cancelled", cancelled_by: by, cancel_reason: "requested", pending_approval: null });
    const [completed] = await eventsOf("workflow.completed", { run_id: run.id });
    expect(completed.data).toMatchObject({ status: "cancelled", cancelled_by: by, cancel_reason: "requested", approvals: [] });
  });

  it("api_key.revoked says which key revoked it, and so does the revoked key", async () => {
    const admin = await keyNamed("admin-2", ["api-keys:write", "api-keys:read", "events:read"]);
    const victim = await keyNamed("victim", ["events:read"]);
    const revoked = await call("DELETE", `/api-keys/${victim.id}`, undefined, admin.key);
    expect(revoked.status).toBe(200);
    const by = { key_id: admin.id, key_name: "admin-2" };
    expect(revoked.body.data).toMatchObject({ status: "revoked", revoked_by: by });
    expect((await call("GET", `/api-keys/${victim.id}`)).body.data.revoked_by).toEqual(by);
    const [event] = await eventsOf("api_key.revoked", { key_id: victim.id });
    expect(event.data).toEqual({ key_id: victim.id, name: "victim", revoked_at: revoked.body.data.revoked_at, revoked_by: by });
    expect((await call("GET", `/api-keys/${admin.id}`)).body.data.revoked_by).toBeNull();
    const [created] = await eventsOf("api_key.created", { key_id: victim.id });
    const me = (await call("GET", "/me")).body.data.api_key;
    expect(created.data.created_by).toEqual({ key_id: me.id, key_name: me.name });
  });

  it("webhook.deleted and workflow.deleted name the deleting key", async () => {
    const carol = await keyNamed("carol", ["webhooks:write", "workflows:write", "events:read"]);
    const hook = await call("POST", "/webhooks", { url: "http://127.0.0.1:9/hook", events: ["order.created"] });
    expect(hook.status).toBe(201);
    expect((await call("DELETE", `/webhooks/${hook.body.data.id}`, undefined, carol.key)).status).toBe(200);
    const [gone] = await eventsOf("webhook.deleted", { webhook_id: hook.body.data.id });
    expect(gone.data).toEqual({
      webhook_id: hook.body.data.id,
      url: "http://127.0.0.1:9/hook",
      deleted_at: expect.any(String),
      deleted_by: { key_id: carol.id, key_name: "carol" },
    });

    const wf = await workflow([{ type: "delay", duration_ms: 10 }]);
    expect((await call("DELETE", `/workflows/${wf.id}`, undefined, carol.key)).status).toBe(200);
    const [deleted] = await eventsOf("workflow.deleted", { workflow_id: wf.id });
    expect(deleted.data).toMatchObject({ name: "approve me", deleted_by: { key_id: carol.id, key_name: "carol" } });
  });

  it("a member's role change records who changed it and when", async () => {
    const org = suite.acme.org.id;
    const added = await call("POST", `/orgs/${org}/members`, { email: "dee@example.com", role: "developer" });
    expect(added.status).toBe(201);
    expect(added.body.data).toMatchObject({ role_changed_by: null, role_changed_at: null });
    const admin = await keyNamed("people-admin", ["org:admin"]);
    const changed = await call("PATCH", `/orgs/${org}/members/${added.body.data.id}`, { role: "admin" }, admin.key);
    expect(changed.status).toBe(200);
    expect(changed.body.data).toMatchObject({
      role: "admin",
      role_changed_by: { key_id: admin.id, key_name: "people-admin" },
      role_changed_at: changed.body.data.updated_at,
    });
    const listed = (await call("GET", `/orgs/${org}/members`)).body.data.find((m: any) => m.id === added.body.data.id);
    expect(listed.role_changed_by).toEqual({ key_id: admin.id, key_name: "people-admin" });
    // …and publishes member.role_changed with the actor, stored with the change (the outbox).
    const [event] = await eventsOf("member.role_changed", { member_id: added.body.data.id });
    expect(event).toMatchObject({ environment: "live", source: "orgs" });
    expect(event.data).toEqual({
      member_id: added.body.data.id,
      email: "dee@example.com",
      previous_role: "developer",
      role: "admin",
      role_changed_by: { key_id: admin.id, key_name: "people-admin" },
      role_changed_at: changed.body.data.role_changed_at,
    });
    const types = (await call("GET", "/events/types?per_page=100")).body.data as { type: string; system: boolean }[];
    expect(types.find((t) => t.type === "member.role_changed")).toMatchObject({ system: true });
    // Reserved one by one: clients keep their own member.* types.
    expectError(await call("POST", "/events", { type: "member.role_changed", data: {} }), 400, "parameter_invalid", "type");
    expect((await call("POST", "/events", { type: "member.signed_up", data: {} })).status).toBe(201);
  });
});
