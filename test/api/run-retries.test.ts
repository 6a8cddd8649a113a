import { createServer, type Server } from "node:http";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";

/** Runs' second chances through HTTP: retry, rerun, GET /runs, workflow versions, and deleting a workflow with runs under way. */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20" });

const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

/** A real http step target on 127.0.0.1 that answers `status()` to each request, and counts them. */
let target: { url: string; hits: number; status: () => number; server: Server };
beforeAll(async () => {
  const t = { hits: 0, status: () => 200 } as typeof target;
  t.server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      t.hits += 1;
      res.writeHead(t.status(), { "content-type": "application/json" }).end(JSON.stringify({ n: t.hits }));
    });
  });
  await new Promise<void>((ok) => t.server.listen(0, "127.0.0.1", ok));
  t.url = `http://127.0.0.1:${(t.server.address() as { port: number }).port}/step`;
  target = t;
});
afterAll(async () => {
  target.server.closeAllConnections();
  await new Promise((ok) => target.server.close(ok));
});

async function workflow(steps: unknown[], name = "wf") {
  const res = await call("POST", "/workflows", { name, trigger: { type: "manual" }, steps });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; version: number };
}
async function start(wfId: string, input: Record<string, unknown> = {}) {
  const res = await call("POST", `/workflows/${wfId}/runs`, { input });
  expect(res.status).toBe(201);
  return res.body.data as { id: string };
}
async function until(wfId: string, runId: string, check: (run: any) => boolean) {
  let run: any;
  await waitFor(`run ${runId} in the state awaited`, async () => {
    run = (await call("GET", `/workflows/${wfId}/runs/${runId}`)).body.data;
    return check(run);
  });
  return run;
}
const ended = (wfId: string, runId: string) => until(wfId, runId, (r) => ["succeeded", "failed", "cancelled"].includes(r.status));
async function completions(runId: string, n: number): Promise<any[]> {
  const find = async () =>
    ((await call("GET", "/events?type=workflow.completed&per_page=100")).body.data as any[]).filter((e) => e.data.run_id === runId);
  await waitFor(`${n} workflow.completed of ${runId}`, async () => (await find()).length >= n);
  return (await find()).reverse();
}

describe("retry", () => {
  it("resumes a failed run from its failed step: same run, attempt 2, what succeeded before is not done again", async () => {
    target.hits = 0;
    target.status = () => (target.hits <= 1 ? 200 : target.hits === 2 ? 503 : 200);
    const wf = await workflow([
      { id: "first", type: "http", method: "POST", url: target.url, retries: 0 },
      { id: "second", type: "http", method: "POST", url: target.url, retries: 0 },
      { id: "tell", type: "emit", event_type: "retry.done", data: { n: "{{steps.second.output.body.n}}" } },
    ]);
    const run = await start(wf.id, { order: "o-1" });
    const failed = await ended(wf.id, run.id);
    expect(failed).toMatchObject({ status: "failed", attempt: 1 });
    expect(failed.steps.map((s: any) => s.status)).toEqual(["succeeded", "failed", "skipped"]);
    expect(target.hits).toBe(2);

    const retried = await call("POST", `/workflows/${wf.id}/runs/${run.id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ id: run.id, status: "queued", attempt: 2, finished_at: null });
    const done = await ended(wf.id, run.id);
    expect(done).toMatchObject({ id: run.id, status: "succeeded", attempt: 2 });
    expect(done.steps.map((s: any) => [s.id, s.status, s.attempt_count])).toEqual([
      ["first", "succeeded", 1],
      ["second", "succeeded", 1],
      ["tell", "succeeded", 1],
    ]);
    // The first step was not sent again: one request for it, two for the second.
    expect(target.hits).toBe(3);
    expect(done.steps[1].output.body).toEqual({ n: 3 });
    const events = await completions(run.id, 2);
    expect(events.map((e) => [e.data.status, e.data.attempt])).toEqual([
      ["failed", 1],
      ["succeeded", 2],
    ]);
  });

  it("is refused for runs that did not fail, a rejected approval, and unknown runs", async () => {
    target.status = () => 200;
    const ok = await workflow([{ type: "http", method: "GET", url: target.url }]);
    const fine = await start(ok.id);
    await ended(ok.id, fine.id);
    expectError(await call("POST", `/workflows/${ok.id}/runs/${fine.id}/retry`), 409, "invalid_state", "run_id");

    const gate = await workflow([{ type: "approval", message: "go?" }]);
    const asked = await start(gate.id);
    await until(gate.id, asked.id, (r) => r.status === "waiting");
    expectError(await call("POST", `/workflows/${gate.id}/runs/${asked.id}/retry`), 409, "invalid_state", "run_id");
    expect((await call("POST", `/workflows/${gate.id}/runs/${asked.id}/reject`)).status).toBe(200);
    const refused = await call("POST", `/workflows/${gate.id}/runs/${asked.id}/retry`);
    expectError(refused, 409, "invalid_state", "run_id");
    expect(refused.body.error.message).toMatch(/rerun it/);
    expectError(await call("POST", `/workflows/${gate.id}/runs/run_nope/retry`), 404, "resource_not_found", "run_id");
    expectError(
      await call("POST", `/workflows/${gate.id}/runs/${asked.id}/retry`, undefined, suite.globex.live),
      404,
      "resource_not_found",
    );
  });
});

describe("rerun", () => {
  it("starts a new run with the old input on the workflow's current version, linked by rerun_of", async () => {
    const wf = await workflow([{ id: "gate", type: "approval", message: "v1 {{input.x}}" }]);
    const old = await start(wf.id, { x: 7 });
    await until(wf.id, old.id, (r) => r.status === "waiting");
    expectError(await call("POST", `/workflows/${wf.id}/runs/${old.id}/rerun`), 409, "invalid_state", "run_id");
    expect((await call("POST", `/workflows/${wf.id}/runs/${old.id}/reject`, { comment: "wrong amount" })).status).toBe(200);
    const patched = await call("PATCH", `/workflows/${wf.id}`, { steps: [{ id: "gate", type: "approval", message: "v2 {{input.x}}" }] });
    expect(patched.body.data.version).toBe(2);

    const res = await call("POST", `/workflows/${wf.id}/runs/${old.id}/rerun`);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: "queued", rerun_of: old.id, attempt: 1, workflow_version: 2, input: { x: 7 } });
    expect(res.body.data.id).not.toBe(old.id);
    const again = await until(wf.id, res.body.data.id, (r) => r.status === "waiting");
    expect(again.pending_approval.message).toBe("v2 7");
    expect((await call("POST", `/workflows/${wf.id}/runs/${again.id}/approve`)).status).toBe(200);
    const [completed] = await completions(again.id, 1);
    expect(completed.data).toMatchObject({ status: "succeeded", rerun_of: old.id });
  });
});

describe("GET /runs", () => {
  it("lists every workflow's runs newest first, by status, workflow and creation time, paged by cursor", async () => {
    const a = await workflow([{ type: "approval" }], "a");
    const b = await workflow([{ type: "delay", duration_ms: 1 }], "b");
    const before = new Date().toISOString();
    await waitFor("a new millisecond", async () => new Date().toISOString() > before);
    const runA1 = await start(a.id);
    const runB1 = await start(b.id);
    const runA2 = await start(a.id);
    await until(a.id, runA2.id, (r) => r.status === "waiting");
    await until(a.id, runA1.id, (r) => r.status === "waiting");
    await ended(b.id, runB1.id);
    const after = new Date().toISOString();

    const since = `/runs?created_after=${encodeURIComponent(before)}`;
    const all = await call("GET", since);
    expect(all.status).toBe(200);
    expect(all.body.data.map((r: any) => r.id)).toEqual([runA2.id, runB1.id, runA1.id]);
    expect(all.body.meta).toMatchObject({ total: 3 });
    const ofA = await call("GET", `${since}&workflow_id=${a.id}`);
    expect(ofA.body.data.map((r: any) => r.id)).toEqual([runA2.id, runA1.id]);
    const waiting = await call("GET", `${since}&status=waiting`);
    expect(waiting.body.data.map((r: any) => r.id)).toEqual([runA2.id, runA1.id]);
    const done = await call("GET", `${since}&status=succeeded&workflow_id=${b.id}`);
    expect(done.body.data.map((r: any) => r.id)).toEqual([runB1.id]);
    expect((await call("GET", `/runs?created_after=${encodeURIComponent(after)}`)).body.data).toEqual([]);
    const older = await call("GET", `/runs?created_before=${encodeURIComponent(before)}&limit=100`);
    expect(older.body.data.map((r: any) => r.id)).not.toContain(runA1.id);

    // By cursor, within the time range.
    const page1 = await call("GET", `${since}&limit=2`);
    expect(page1.body.data.map((r: any) => r.id)).toEqual([runA2.id, runB1.id]);
    expect(page1.body.meta).toMatchObject({ limit: 2, has_more: true });
    const page2 = await call("GET", `${since}&limit=2&starting_after=${runB1.id}`);
    expect(page2.body.data.map((r: any) => r.id)).toEqual([runA1.id]);
    expect(page2.body.meta).toMatchObject({ has_more: false });
    const back = await call("GET", `${since}&limit=2&ending_before=${runA1.id}`);
    expect(back.body.data.map((r: any) => r.id)).toEqual([runA2.id, runB1.id]);

    // Another organization sees none of them.
    expect((await call("GET", since, undefined, suite.globex.live)).body.data).toEqual([]);
  });

  it("refuses bad filters and pages past the bound", async () => {
    expectError(await call("GET", "/runs?status=done"), 400, "parameter_invalid", "status");
    expectError(await call("GET", "/runs?created_after=yesterday"), 400, "parameter_invalid", "created_after");
    expectError(await call("GET", "/runs?created_before=1700000000"), 400, "parameter_invalid", "created_before");
    expectError(await call("GET", "/runs?per_page=101"), 400, "parameter_invalid", "per_page");
    expectError(await call("GET", "/runs?page=200&per_page=100"), 400, "parameter_invalid", "page");
    expectError(await call("GET", "/runs?colour=red"), 400, "parameter_unknown");
  });
});

describe("workflow versions", () => {
  it("each version's definition is retrievable after updates; none of another organization's, none after deletion", async () => {
    const wf = await workflow([{ id: "one", type: "delay", duration_ms: 5 }], "versioned");
    await call("PATCH", `/workflows/${wf.id}`, { name: "renamed" });
    await call("PATCH", `/workflows/${wf.id}`, { steps: [{ id: "two", type: "approval", message: "ok?" }] });
    const v1 = await call("GET", `/workflows/${wf.id}/versions/1`);
    expect(v1.status).toBe(200);
    expect(v1.body.data).toMatchObject({
      workflow_id: wf.id,
      version: 1,
      name: "versioned",
      steps: [{ id: "one", type: "delay", duration_ms: 5 }],
    });
    expect(v1.body.data.created_by).toMatchObject({ key_id: expect.stringMatching(/^key_/) });
    expect((await call("GET", `/workflows/${wf.id}/versions/2`)).body.data).toMatchObject({
      version: 2,
      name: "renamed",
      steps: [{ id: "one" }],
    });
    expect((await call("GET", `/workflows/${wf.id}/versions/3`)).body.data).toMatchObject({
      version: 3,
      name: "renamed",
      steps: [{ id: "two", type: "approval", message: "ok?" }],
    });
    expectError(await call("GET", `/workflows/${wf.id}/versions/4`), 404, "resource_not_found", "version");
    expectError(await call("GET", `/workflows/${wf.id}/versions/0`), 400, "parameter_invalid", "version");
    expectError(await call("GET", `/workflows/${wf.id}/versions/1`, undefined, suite.globex.live), 404, "resource_not_found");
    await call("DELETE", `/workflows/${wf.id}`);
    expectError(await call("GET", `/workflows/${wf.id}/versions/1`), 404, "resource_not_found", "version");
  });
});

describe("deleting a workflow", () => {
  it("cancels its waiting and queued runs, with their events; they can no longer be approved; ended runs stay", async () => {
    target.status = () => 200;
    const wf = await workflow([
      { type: "approval", message: "ship?" },
      { type: "delay", duration_ms: 60_000 },
    ]);
    const finished = await start(wf.id);
    await until(wf.id, finished.id, (r) => r.status === "waiting");
    await call("POST", `/workflows/${wf.id}/runs/${finished.id}/reject`);
    const asking = await start(wf.id);
    const delayed = await start(wf.id);
    await until(wf.id, asking.id, (r) => r.status === "waiting");
    await until(wf.id, delayed.id, (r) => r.status === "waiting");
    expect((await call("POST", `/workflows/${wf.id}/runs/${delayed.id}/approve`)).status).toBe(200);
    await until(wf.id, delayed.id, (r) => r.steps[1].status === "waiting");

    const deleted = await call("DELETE", `/workflows/${wf.id}`);
    expect(deleted.status).toBe(200);
    for (const id of [asking.id, delayed.id]) {
      const run = await ended(wf.id, id);
      expect(run).toMatchObject({ status: "cancelled", cancel_reason: "workflow_deleted", pending_approval: null });
      expect(run.cancelled_by).toMatchObject({ key_id: expect.stringMatching(/^key_/) });
      const [event] = await completions(id, 1);
      expect(event.data).toMatchObject({ status: "cancelled", cancel_reason: "workflow_deleted", cancelled_by: run.cancelled_by });
    }
    expect((await call("GET", `/workflows/${wf.id}/runs/${finished.id}`)).body.data).toMatchObject({ status: "failed" });
    expectError(await call("POST", `/workflows/${wf.id}/runs/${asking.id}/approve`), 404, "resource_not_found", "id");
    expectError(await call("POST", `/workflows/${wf.id}/runs/${finished.id}/retry`), 404, "resource_not_found", "id");
    expectError(await call("POST", `/workflows/${wf.id}/runs/${finished.id}/rerun`), 404, "resource_not_found", "id");
  });
});
