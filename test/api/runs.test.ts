import { createServer, type IncomingMessage, type Server } from "node:http";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

/** Short settings, so waits and retries play out within a test. */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "30", WEBHOOK_RETRY_DELAYS_MS: "50,50,50,50" });

/** An HTTP server for http steps: records what it gets, answers as told. */
interface Target {
  url: string;
  got: { method: string; path: string; headers: IncomingMessage["headers"]; body: string }[];
  answer: (n: number) => { status: number; json?: unknown; hang?: boolean };
  server: Server;
}
let target: Target;
let rx: Receiver;

beforeAll(async () => {
  rx = await startReceiver();
  const got: Target["got"] = [];
  const t = { got, answer: () => ({ status: 200, json: { ok: true } }) } as unknown as Target;
  t.server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      got.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers, body });
      const a = t.answer(got.length);
      if (a.hang) return;
      res.writeHead(a.status, { "content-type": "application/json" }).end(JSON.stringify(a.json ?? {}));
    });
  });
  await new Promise<void>((ok) => t.server.listen(0, "127.0.0.1", ok));
  t.url = `http://127.0.0.1:${(t.server.address() as { port: number }).port}`;
  target = t;
});
afterAll(async () => {
  target.server.closeAllConnections();
  await new Promise((ok) => target.server.close(ok));
  await rx.close();
});
beforeEach(() => {
  target.got.length = 0;
  target.answer = () => ({ status: 200, json: { ok: true } });
});

const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

async function workflow(body: Record<string, unknown>, key = suite.acme.live) {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, ...body }, key);
  expect(res.status).toBe(201);
  return res.body.data as { id: string };
}

async function start(wfId: string, input?: unknown, key = suite.acme.live) {
  const res = await call("POST", `/workflows/${wfId}/runs`, input === undefined ? {} : { input }, key);
  expect(res.status).toBe(201);
  return res.body.data as { id: string; status: string };
}

/** Polls the run (every 25 ms) until `check` holds; answers it, or fails with its last state. */
const until = (wfId: string, runId: string, check: (run: any) => boolean, timeoutMs = 8000) =>
  eventuallyValue(
    `run ${runId} in the state awaited`,
    async () => (await call("GET", `/workflows/${wfId}/runs/${runId}`)).body.data,
    check,
    timeoutMs,
    25,
  );
const ended = (wfId: string, runId: string, timeoutMs?: number) =>
  until(wfId, runId, (r) => ["succeeded", "failed", "cancelled"].includes(r.status), timeoutMs);
const completions = async (runId: string) =>
  (await call("GET", "/events?type=workflow.completed&per_page=100")).body.data.filter((e: any) => e.data.run_id === runId);
/** The statuses of a run's `workflow.completed` events, once there is one (published from the run's outbox after it ends). */
async function completed(runId: string): Promise<string[]> {
  await waitFor(`run ${runId}'s workflow.completed event`, async () => (await completions(runId)).length > 0);
  return (await completions(runId)).map((e: any) => e.data.status);
}

describe("runs end to end", () => {
  it("an event starts a run: http step, approval (announced by webhook), approved over the API, emit, succeeded", async () => {
    target.answer = () => ({ status: 200, json: { ref: "R-42" } });
    const hook = await call("POST", "/webhooks", {
      url: rx.url("/e2e"),
      events: ["approval.requested", "workflow.completed", "order.shipped"],
    });
    rx.setSecret("/e2e", hook.body.data.secret);
    const wf = await workflow({
      trigger: { type: "event", event_type: "order.created" },
      steps: [
        {
          id: "fetch",
          type: "http",
          method: "POST",
          url: `${target.url}/orders/{{input.event.data.order_id}}`,
          headers: { "x-order": "{{input.event.data.order_id}}" },
          body: { order: "{{input.event.data.order_id}}", qty: "{{input.event.data.qty}}" },
        },
        { id: "ok", type: "approval", message: "Ship {{steps.fetch.output.body.ref}}?" },
        { id: "tell", type: "emit", event_type: "order.shipped", data: { ref: "{{steps.fetch.output.body.ref}}" } },
      ],
    });
    const emitted = await call("POST", "/events", { type: "order.created", data: { order_id: "o1", qty: 3 } });
    expect(emitted.status).toBe(201);

    await rx.waitFor(() => rx.byPath("/e2e").some((r) => r.json.type === "approval.requested"), 8000);
    const asked = rx.byPath("/e2e").find((r) => r.json.type === "approval.requested")!;
    expect(asked.verified).toBe(true);
    const runId = asked.json.data.run_id as string;
    expect(asked.json.data).toEqual({ workflow_id: wf.id, run_id: runId, step_id: "ok", message: "Ship R-42?" });
    expect(target.got).toHaveLength(1);
    expect(target.got[0]).toMatchObject({ method: "POST", path: "/orders/o1" });
    expect(target.got[0].headers["x-order"]).toBe("o1");
    expect(JSON.parse(target.got[0].body)).toEqual({ order: "o1", qty: 3 });

    const waiting = (await call("GET", `/workflows/${wf.id}/runs/${runId}`)).body.data;
    expect(waiting).toMatchObject({
      status: "waiting",
      workflow_version: 1,
      trigger: { type: "event", event_id: emitted.body.data.id, event_type: "order.created" },
    });
    expect(waiting.input.event.data).toEqual({ order_id: "o1", qty: 3 });
    expect(waiting.steps.map((s: any) => s.status)).toEqual(["succeeded", "waiting", "pending"]);
    expect(waiting.steps[0]).toMatchObject({ output: { status_code: 200, body: { ref: "R-42" } }, attempt_count: 1, error: null });

    const approved = await call("POST", `/workflows/${wf.id}/runs/${runId}/approve`);
    expect(approved.status).toBe(200);
    await rx.waitFor(() => rx.byPath("/e2e").some((r) => r.json.type === "workflow.completed"), 8000);
    const done = rx.byPath("/e2e").filter((r) => r.json.type === "workflow.completed");
    expect(done.map((r) => r.json.data)).toEqual([
      {
        workflow_id: wf.id,
        run_id: runId,
        status: "succeeded",
        attempt: 1,
        rerun_of: null,
        approvals: [{ step_id: "ok", decision: "approved", comment: null, decided_by: expect.any(Object), decided_at: expect.any(String) }],
        failed_step: null,
        stop_message: null,
      },
    ]);
    const shipped = rx.byPath("/e2e").filter((r) => r.json.type === "order.shipped");
    expect(shipped.map((r) => r.json.data)).toEqual([{ ref: "R-42" }]);

    const run = (await call("GET", `/workflows/${wf.id}/runs/${runId}`)).body.data;
    expect(run.status).toBe("succeeded");
    expect(run.finished_at).toEqual(expect.any(String));
    expect(run.steps.map((s: any) => [s.id, s.status])).toEqual([
      ["fetch", "succeeded"],
      ["ok", "succeeded"],
      ["tell", "succeeded"],
    ]);
    expect(run.steps[2].output.event_id).toBe(shipped[0].json.id);
    for (const internal of ["org_id", "definition", "cursor", "rev", "due_at", "lease", "outbox", "trigger_key"])
      expect(run).not.toHaveProperty(internal);
    // One event, one run.
    const runs = (await call("GET", `/workflows/${wf.id}/runs`)).body;
    expect(runs.meta.total).toBe(1);
  });

  it("an http step that keeps failing ends the run failed after its retries", async () => {
    target.answer = () => ({ status: 500, json: { error: "down" } });
    const wf = await workflow({
      steps: [
        { id: "call", type: "http", url: `${target.url}/x`, retries: 2 },
        { type: "emit", event_type: "never.sent" },
      ],
    });
    const run = await start(wf.id);
    const done = await ended(wf.id, run.id);
    expect(done.status).toBe("failed");
    expect(done.steps[0]).toMatchObject({
      status: "failed",
      attempt_count: 3,
      error: "the server answered 500",
      output: { status_code: 500, body: { error: "down" } },
    });
    expect(done.steps[1].status).toBe("skipped");
    expect(target.got).toHaveLength(3);
    expect(await completed(run.id)).toEqual(["failed"]);
    expect((await call("GET", "/events?type=never.sent")).body.meta.total).toBe(0);
  });

  it("an http step slower than its time-out fails the attempt", async () => {
    target.answer = () => ({ status: 200, hang: true });
    const wf = await workflow({ steps: [{ type: "http", method: "GET", url: `${target.url}/slow`, timeout_ms: 150 }] });
    const run = await start(wf.id);
    const done = await ended(wf.id, run.id);
    expect(done.status).toBe("failed");
    expect(done.steps[0]).toMatchObject({ attempt_count: 1, error: "no answer within 150 ms" });
  });

  it("cancel during a delay ends the run cancelled, and nothing after it runs", async () => {
    const wf = await workflow({
      steps: [
        { type: "delay", duration_ms: 1500 },
        { type: "http", url: `${target.url}/after` },
      ],
    });
    const run = await start(wf.id);
    expect(run.status).toBe("queued");
    // A second run, started after it and not cancelled: once its http step has been sent, the
    // cancelled run's delay has run out too, and its http step would have been sent before.
    const witness = await start(wf.id);
    await until(wf.id, run.id, (r) => r.status === "waiting");
    const cancelled = await call("POST", `/workflows/${wf.id}/runs/${run.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.data.status).toBe("cancelled");
    expect(cancelled.body.data.steps.map((s: any) => s.status)).toEqual(["cancelled", "skipped"]);
    expect((await ended(wf.id, witness.id)).status).toBe("succeeded");
    expect(target.got).toHaveLength(1);
    expect((await call("GET", `/workflows/${wf.id}/runs/${run.id}`)).body.data.status).toBe("cancelled");
    expect((await completions(run.id)).map((e: any) => e.data.status)).toEqual(["cancelled"]);
    expectError(await call("POST", `/workflows/${wf.id}/runs/${run.id}/cancel`), 409, "invalid_state", "run_id");
  });

  it("a delay is a stored wait: the run goes on when it is due", async () => {
    const wf = await workflow({
      steps: [
        { type: "delay", duration_ms: 300 },
        { type: "emit", event_type: "delay.done", data: { n: 1 } },
      ],
    });
    const t0 = Date.now();
    const run = await start(wf.id);
    const done = await ended(wf.id, run.id);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(done.status).toBe("succeeded");
    expect(done.steps[0]).toMatchObject({ status: "succeeded", output: { waited_ms: 300 } });
  });

  it("approving or rejecting a run that is not waiting for approval is a 409; reject ends it failed", async () => {
    const wf = await workflow({
      steps: [
        { type: "approval", message: "go?" },
        { type: "emit", event_type: "went.ahead" },
      ],
    });
    const run = await start(wf.id);
    await until(wf.id, run.id, (r) => r.status === "waiting");
    const rejected = await call("POST", `/workflows/${wf.id}/runs/${run.id}/reject`);
    expect(rejected.status).toBe(200);
    expect(rejected.body.data.status).toBe("failed");
    expect(rejected.body.data.steps[0]).toMatchObject({ status: "failed", error: "rejected", output: { approved: false } });
    expectError(await call("POST", `/workflows/${wf.id}/runs/${run.id}/approve`), 409, "invalid_state", "run_id");
    expectError(await call("POST", `/workflows/${wf.id}/runs/${run.id}/reject`), 409, "invalid_state", "run_id");

    const busy = await workflow({ steps: [{ type: "delay", duration_ms: 2000 }, { type: "approval" }] });
    const other = await start(busy.id);
    await until(busy.id, other.id, (r) => r.status === "waiting");
    expectError(await call("POST", `/workflows/${busy.id}/runs/${other.id}/approve`), 409, "invalid_state", "run_id");
    await call("POST", `/workflows/${busy.id}/runs/${other.id}/cancel`);
    expect(await completed(run.id)).toEqual(["failed"]);
  });

  it("an event a run emits does not start the same workflow again", async () => {
    const wf = await workflow({ trigger: { type: "event", event_type: "ping.pong" }, steps: [{ type: "emit", event_type: "ping.pong" }] });
    // Another workflow on the same type: its second run shows the run's event went through the trigger.
    const witness = await workflow({ trigger: { type: "event", event_type: "ping.pong" }, steps: [{ type: "delay", duration_ms: 1 }] });
    await call("POST", "/events", { type: "ping.pong" });
    await waitFor(
      "the witness workflow started by the API's event and by the run's",
      async () => (await call("GET", `/workflows/${witness.id}/runs`)).body.meta.total === 2,
    );
    const runs = (await call("GET", `/workflows/${wf.id}/runs`)).body;
    expect(runs.meta.total).toBe(1);
    expect(runs.data[0].status).toBe("succeeded");
  });

  it("workflows that start each other through their events stop after 10 event-started runs", async () => {
    const a = await workflow({ trigger: { type: "event", event_type: "ping.a" }, steps: [{ type: "emit", event_type: "ping.b" }] });
    const b = await workflow({ trigger: { type: "event", event_type: "ping.b" }, steps: [{ type: "emit", event_type: "ping.a" }] });
    await call("POST", "/events", { type: "ping.a" });
    const total = async () =>
      (await call("GET", `/workflows/${a.id}/runs`)).body.meta.total + (await call("GET", `/workflows/${b.id}/runs`)).body.meta.total;
    await waitFor("10 event-started runs", async () => (await total()) >= 10, 8000);
    const all = async () => [
      ...(await call("GET", `/workflows/${a.id}/runs?per_page=100`)).body.data,
      ...(await call("GET", `/workflows/${b.id}/runs?per_page=100`)).body.data,
    ];
    await waitFor("every run of the chain ended (and stored the event it emits)", async () =>
      (await all()).every((r: any) => r.status === "succeeded"),
    );
    // An event stored after the chain's last one: once its run has started, the trigger has been
    // through the chain's last event, which started nothing.
    const witness = await workflow({ trigger: { type: "event", event_type: "chain.witness" }, steps: [{ type: "delay", duration_ms: 1 }] });
    await call("POST", "/events", { type: "chain.witness" });
    await waitFor("the witness run", async () => (await call("GET", `/workflows/${witness.id}/runs`)).body.meta.total === 1);
    expect(await total()).toBe(10);
    expect((await call("GET", `/workflows/${a.id}/runs`)).body.meta.total).toBe(5);
  });

  it("refuses bad starts: inactive, unknown, other organization's, bad input", async () => {
    const wf = await workflow({ status: "inactive", steps: [{ type: "delay", duration_ms: 1 }] });
    expectError(await call("POST", `/workflows/${wf.id}/runs`, {}), 409, "invalid_state", "id");
    expectError(await call("POST", "/workflows/wf_nope/runs", {}), 404, "resource_not_found", "id");
    const mine = await workflow({ steps: [{ type: "delay", duration_ms: 1 }] });
    expectError(await call("POST", `/workflows/${mine.id}/runs`, {}, suite.globex.live), 404, "resource_not_found", "id");
    expectError(await call("POST", `/workflows/${mine.id}/runs`, { input: [1, 2] }), 400, "parameter_invalid", "input");
    expectError(
      await call("POST", `/workflows/${mine.id}/runs`, { input: { big: "x".repeat(70_000) } }),
      400,
      "parameter_invalid",
      "input",
    );
    const run = await start(mine.id, { a: 1 });
    expectError(await call("GET", `/workflows/${mine.id}/runs/${run.id}`, undefined, suite.globex.live), 404, "resource_not_found");
    expectError(await call("GET", `/workflows/${mine.id}/runs/${run.id}`, undefined, suite.acme.test), 404, "resource_not_found");
    expectError(await call("POST", `/workflows/${mine.id}/runs/${run.id}/cancel`, {}, suite.globex.live), 404, "resource_not_found");
    expectError(await call("GET", `/workflows/${wf.id}/runs/${run.id}`), 404, "resource_not_found", "run_id");
    const listed = await call("GET", `/workflows/${mine.id}/runs?status=succeeded`);
    await ended(mine.id, run.id);
    expect(listed.status).toBe(200);
  });
});
