import { configured, platformOf } from "../../app/broker";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceBroker, type Context } from "moleculer";
import WorkflowsService from "../../services/workflows/workflows.service";
import { loadSettings } from "../../shared/config";
import type { EventDoc } from "../../shared/records/events";
import { waitFor } from "../../tools/procs";

/**
 * The workflows service alone on a broker, its store on a temporary DATA_DIR: the run engine drives
 * runs through real http steps (a server on 127.0.0.1), a delay and an approval. Its neighbours are
 * stubbed at the broker: an `events` service that takes the events the workflows service publishes
 * (`events.publish`, each id stored once, as the real one does) and the markers it unsets, and no gateway
 * (actions are called with the caller in `meta.auth`, as the gateway passes it).
 */
const caller = {
  key_id: "key_1",
  key_name: "ci",
  org_id: "org_1",
  environment: "test" as const,
  scopes: ["workflows:read", "workflows:write"],
};
const meta = { auth: caller };

let dir: string;
let broker: ServiceBroker;
let server: Server;
let base: string;
/** Requests the http target received, by path. */
const hits: Record<string, number> = {};
/** How the target answers the nth request to a path. */
const answers: Record<string, (n: number) => { status: number; body: unknown }> = {
  "/orders/o1": () => ({ status: 200, body: { ref: "R-1" } }),
  "/flaky": (n) => (n <= 2 ? { status: 503, body: { error: "busy" } } : { status: 200, body: { ok: true } }),
  "/down": () => ({ status: 500, body: "down" }),
};
const requests: { path: string; method: string; headers: Record<string, unknown>; body: string; at: number }[] = [];
/** Events the workflows service published, as the stub events service saw them. */
const published = new Map<string, Pick<EventDoc, "id" | "type" | "data">>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wfp-wf-svc-"));
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "/";
      hits[path] = (hits[path] ?? 0) + 1;
      requests.push({ path, method: req.method ?? "", headers: req.headers, body: Buffer.concat(chunks).toString(), at: Date.now() });
      const answer = answers[path]?.(hits[path]) ?? { status: 404, body: null };
      res.writeHead(answer.status, { "content-type": "application/json" }).end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

  broker = new ServiceBroker({ logger: false, nodeID: "workflows-alone" });
  const settings = loadSettings({
    DATA_DIR: dir,
    SERVICES: "workflows",
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WORKFLOW_RETRY_BASE_MS: "50",
  });
  broker.createService(configured(WorkflowsService, platformOf(settings)));
  broker.createService({
    name: "events",
    actions: {
      publish(ctx: Context<{ events: EventDoc[] }>) {
        const stored = ctx.params.events.filter((e) => !published.has(e.id));
        for (const e of stored) published.set(e.id, e);
        return stored.map((e) => e.id);
      },
      unmark() {
        return 0;
      },
    },
  });
  await broker.start();
});

afterAll(async () => {
  await broker.stop();
  await new Promise((ok) => server.close(ok));
  rmSync(dir, { recursive: true, force: true });
});

const call = <T = any>(action: string, params: object): Promise<T> => broker.call(`workflows.${action}`, params, { meta });
const run = (workflowId: string, runId: string) => call("getRun", { id: workflowId, run_id: runId });
const eventsOf = (runId: string) => [...published.values()].filter((e) => e.data.run_id === runId || e.type === "order.done");

async function runUntil(workflowId: string, runId: string, status: string): Promise<any> {
  let last: any;
  await waitFor(`run ${runId} ${status}`, async () => (last = await run(workflowId, runId)).status === status, 10_000);
  return last;
}

describe("the workflows service alone on a broker", () => {
  it("drives a run: http step, delay, approval; approved, it finishes and publishes its events", async () => {
    const wf = await call("create", {
      name: "order",
      trigger: { type: "manual" },
      steps: [
        {
          id: "fetch",
          type: "http",
          method: "POST",
          url: `${base}/orders/{{input.order}}`,
          headers: { "X-Order": "{{input.order}}" },
          body: { qty: "{{input.qty}}" },
        },
        { id: "pause", type: "delay", duration_ms: 300 },
        { id: "ok", type: "approval", message: "ship {{steps.fetch.output.body.ref}}?" },
        { id: "tell", type: "emit", event_type: "order.done", data: { ref: "{{steps.fetch.output.body.ref}}" } },
      ],
    });
    const started = await call("startRun", { id: wf.id, input: { order: "o1", qty: 3 } });
    // Stored already claimed by this node, its http step shown running before the request leaves.
    expect(started).toMatchObject({
      status: "running",
      steps: [{ status: "running" }, { status: "pending" }, { status: "pending" }, { status: "pending" }],
    });

    const waiting = await runUntil(wf.id, started.id, "waiting");
    await waitFor("the run at its approval step", async () => (await run(wf.id, started.id)).steps[2].status === "waiting", 10_000);
    const atApproval = await run(wf.id, started.id);
    expect(waiting.steps[0]).toMatchObject({ status: "succeeded", attempt_count: 1, output: { status_code: 200, body: { ref: "R-1" } } });
    const request = requests.find((r) => r.path === "/orders/o1");
    expect(request).toMatchObject({ method: "POST", body: '{"qty":3}' });
    expect(request!.headers).toMatchObject({ "x-order": "o1", "content-type": "application/json", "user-agent": "wfp-workflows/1" });
    // The delay was waited out: the approval began no sooner than 300 ms after it.
    const [pause, ok] = [atApproval.steps[1], atApproval.steps[2]];
    expect(pause).toMatchObject({ status: "succeeded", output: { waited_ms: 300 } });
    expect(Date.parse(ok.started_at) - Date.parse(pause.started_at)).toBeGreaterThanOrEqual(300);
    await waitFor("approval.requested", () => eventsOf(started.id).some((e) => e.type === "approval.requested"), 10_000);
    expect(eventsOf(started.id).find((e) => e.type === "approval.requested")!.data).toEqual({
      workflow_id: wf.id,
      run_id: started.id,
      step_id: "ok",
      message: "ship R-1?",
    });

    const approved = await call("approveRun", { id: wf.id, run_id: started.id });
    expect(approved.status).toBe("running");
    expect(approved.steps[2]).toMatchObject({ status: "succeeded", output: { approved: true } });

    const done = await runUntil(wf.id, started.id, "succeeded");
    expect(done.steps.map((s: { status: string }) => s.status)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
    expect(done.finished_at).not.toBeNull();
    await waitFor("workflow.completed", () => eventsOf(started.id).some((e) => e.type === "workflow.completed"), 10_000);
    const told = eventsOf(started.id).find((e) => e.type === "order.done")!;
    expect(told).toMatchObject({ id: done.steps[3].output.event_id, data: { ref: "R-1" } });
    expect(eventsOf(started.id).find((e) => e.type === "workflow.completed")!.data).toEqual({
      workflow_id: wf.id,
      run_id: started.id,
      status: "succeeded",
      attempt: 1,
      rerun_of: null,
      approvals: [
        {
          step_id: "ok",
          decision: "approved",
          comment: null,
          decided_by: { key_id: "key_1", key_name: "ci" },
          decided_at: expect.any(String),
        },
      ],
      failed_step: null,
      stop_message: null,
    });
    // An ended run takes no more decisions.
    await expect(call("cancelRun", { id: wf.id, run_id: started.id })).rejects.toMatchObject({ type: "invalid_state" });
    await expect(call("approveRun", { id: wf.id, run_id: started.id })).rejects.toMatchObject({ type: "invalid_state" });
  });

  it("retries a failing http step, with back-off, and goes on once it succeeds", async () => {
    const wf = await call("create", {
      name: "flaky",
      trigger: { type: "manual" },
      steps: [{ id: "try", type: "http", method: "GET", url: `${base}/flaky`, retries: 3 }],
    });
    const started = await call("startRun", { id: wf.id });
    const done = await runUntil(wf.id, started.id, "succeeded");
    expect(hits["/flaky"]).toBe(3);
    expect(done.steps[0]).toMatchObject({
      status: "succeeded",
      attempt_count: 3,
      error: null,
      output: { status_code: 200, body: { ok: true } },
    });
    // Each retry waited its back-off (WORKFLOW_RETRY_BASE_MS 50: 50 ms, then 100 ms) after the attempt before.
    const [first, second, third] = requests.filter((r) => r.path === "/flaky").map((r) => r.at);
    expect(second - first).toBeGreaterThanOrEqual(50);
    expect(third - second).toBeGreaterThanOrEqual(100);
  });

  it("fails the run when the step is out of retries", async () => {
    const wf = await call("create", {
      name: "down",
      trigger: { type: "manual" },
      steps: [
        { id: "try", type: "http", method: "GET", url: `${base}/down`, retries: 1 },
        { id: "after", type: "delay", duration_ms: 1 },
      ],
    });
    const started = await call("startRun", { id: wf.id });
    const failed = await runUntil(wf.id, started.id, "failed");
    expect(hits["/down"]).toBe(2);
    expect(failed.steps[0]).toMatchObject({
      status: "failed",
      attempt_count: 2,
      error: "the server answered 500",
      output: { status_code: 500 },
    });
    expect(failed.steps[1].status).toBe("skipped");
    await waitFor(
      "workflow.completed (failed)",
      () => eventsOf(started.id).some((e) => e.type === "workflow.completed" && e.data.status === "failed"),
      10_000,
    );
  });
});
