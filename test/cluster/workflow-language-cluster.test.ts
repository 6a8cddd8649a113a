import { createServer, type Server } from "node:http";
import { api } from "../helpers/platform";
import { eventuallyValue } from "../../tools/eventually";
import {
  freePort,
  runCli,
  saveClusterLogs,
  startNats,
  startNode,
  tempDir,
  waitFor,
  waitForGateway,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";

/**
 * The language's constructs survive SIGKILL at their most delicate points, across real processes
 * over a real nats-server: a time-out that falls due while no workflows node runs, and a node
 * killed between an http attempt (under a retry policy, after conditions and set steps) and its
 * stored result; events that pass a trigger's filter while no workflows node runs, and a run killed
 * while its failing step (on_error: continue) is in flight before a stop step.
 */
jest.setTimeout(120_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;
let common: Record<string, string>;
let target: Server;
let targetPort: number;
const hits: { path: string; at: number }[] = [];

beforeAll(async () => {
  target = createServer((req, res) => {
    hits.push({ path: req.url ?? "", at: Date.now() });
    const answer = () => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    if (req.url?.startsWith("/slow")) setTimeout(answer, 1500);
    // Long enough that the node driving it is killed while it is in flight, though the run starts
    // while the node is still coming up.
    else if (req.url?.startsWith("/refuse")) setTimeout(() => res.writeHead(500).end("no"), 6000);
    else answer();
  });
  await new Promise<void>((ok) => target.listen(0, "127.0.0.1", ok));
  targetPort = (target.address() as { port: number }).port;
  nats = await startNats();
  dir = tempDir();
  common = { TRANSPORTER: nats.url, DATA_DIR: dir.path, WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RATE_LIMIT_MAX: "100000" };
  const port = await freePort();
  nodes.push(startNode("api", { ...common, SERVICES: "gateway,auth,keys,orgs,events,webhooks", PORT: String(port) }));
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Lang Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
});

afterAll(async () => {
  saveClusterLogs("workflow-language", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  target?.closeAllConnections();
  await new Promise((ok) => target?.close(ok));
  dir?.remove();
});

const url = (path: string) => `http://127.0.0.1:${targetPort}${path}`;
async function workflowsNode(name: string): Promise<NodeProc> {
  const node = startNode(name, { ...common, SERVICES: "workflows" });
  nodes.push(node);
  await waitFor(`${name} to serve`, async () => (await api(gw, "GET", "/workflows", { key: admin })).status === 200, 30_000);
  return node;
}
async function create(body: Record<string, unknown>) {
  const res = await api(gw, "POST", "/workflows", { key: admin, body: { name: "wf", trigger: { type: "manual" }, ...body } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
async function runOf(wf: string, run: string) {
  let res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  for (let tries = 0; res.status !== 200 && tries < 40; tries += 1)
    res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data;
}
const ended = (wf: string, run: string) =>
  waitFor(`run ${run} to end`, async () => ["succeeded", "failed", "cancelled"].includes((await runOf(wf, run)).status), 60_000);

describe("the workflow language under SIGKILL", () => {
  it("time-outs that fall due while no workflows node runs are carried out once one starts", async () => {
    const only = await workflowsNode("w1");
    const approval = await create({
      steps: [
        { id: "gate", type: "approval", message: "ok?", timeout_ms: 1000, on_error: "continue" },
        { id: "after", type: "set", output: "{{ steps.gate.error.code }}" },
      ],
    });
    const bounded = await create({ timeout_ms: 1000, steps: [{ id: "nap", type: "delay", duration_ms: 600_000 }] });
    const a = (await api(gw, "POST", `/workflows/${approval}/runs`, { key: admin, body: {} })).body.data.id as string;
    const b = (await api(gw, "POST", `/workflows/${bounded}/runs`, { key: admin, body: {} })).body.data.id as string;
    await waitFor(
      "both runs waiting",
      async () => (await runOf(approval, a)).status === "waiting" && (await runOf(bounded, b)).status === "waiting",
    );
    await only.kill("SIGKILL");
    const killedAt = Date.now();
    // Real time passing is the subject: both limits fall due while no workflows node runs.
    await waitFor("both limits to pass", async () => Date.now() > killedAt + 1500, 10_000);
    await workflowsNode("w2");
    await ended(approval, a);
    await ended(bounded, b);
    const timedOut = await runOf(approval, a);
    expect(timedOut.status).toBe("succeeded");
    expect(timedOut.steps[0]).toMatchObject({ status: "failed", error_code: "timed_out" });
    expect(timedOut.steps[1].output).toBe("timed_out");
    const late = await runOf(bounded, b);
    expect(late.status).toBe("failed");
    expect(late.steps[0]).toMatchObject({ status: "failed", error_code: "run_timed_out" });
    const completed = (await api(gw, "GET", "/events?type=workflow.completed&per_page=100", { key: admin })).body.data;
    expect(completed.filter((e: any) => e.data.run_id === b).map((e: any) => e.data.failed_step)).toEqual([
      { id: "nap", error: { code: "run_timed_out", message: expect.any(String) } },
    ]);
  });

  it("a node killed between an http attempt and its stored result: another finishes the run, conditions and set steps as decided", async () => {
    const spare = await workflowsNode("w3");
    const wf = await create({
      steps: [
        { id: "price", type: "set", output: { total: "{{ input.qty * 2.5 }}" } },
        { id: "skip_me", type: "http", url: url("/never"), if: "steps.price.output.total > 100" },
        {
          id: "slow",
          type: "http",
          url: url("/slow/{{ steps.price.output.total }}"),
          timeout_ms: 3000,
          if: "steps.skip_me.status == 'skipped'",
          retry: { max_attempts: 3, initial_interval_ms: 10, backoff_rate: 1, max_interval_ms: 10, jitter: "none", on: ["5xx", "timeout"] },
        },
        { id: "done", type: "set", output: "{{ steps.slow.output.body.ok && steps.price.output.total == 10.0 }}" },
      ],
    });
    const run = (await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: { input: { qty: 4 } } })).body.data.id as string;
    await waitFor("the slow step in flight", () => hits.some((h) => h.path === "/slow/10"), 20_000);
    // Both live workflows nodes could hold it: kill them both, then start a fresh one.
    await Promise.all(nodes.filter((n) => n.name !== "api").map((n) => n.kill("SIGKILL")));
    const killedAt = Date.now();
    expect(spare).toBeDefined();
    await workflowsNode("w4");
    await ended(wf, run);
    const done = await runOf(wf, run);
    expect(done.status).toBe("succeeded");
    expect(done.steps.map((s: any) => s.status)).toEqual(["succeeded", "skipped", "succeeded", "succeeded"]);
    expect(done.steps[0].output).toEqual({ total: 10 });
    expect(done.steps[3].output).toBe(true);
    const slow = hits.filter((h) => h.path === "/slow/10");
    expect(slow).toHaveLength(2);
    expect(slow[1].at).toBeGreaterThanOrEqual(killedAt);
    expect(hits.filter((h) => h.path === "/never")).toHaveLength(0);
    // The attempt cut by the kill was never stored: the step shows the one that finished.
    expect(done.steps[2].attempts.map((a: any) => a.status_code)).toEqual([200]);
  });

  it("events stored while no workflows node runs start one run each if they pass the filter; a kill before on_error and stop changes nothing", async () => {
    await workflowsNode("w5");
    const wf = await create({
      trigger: { type: "event", event_type: "refund.*", filter: "event.data.amount >= 500" },
      steps: [
        { id: "charge", type: "http", url: url("/refuse/{{ input.event.data.amount }}"), timeout_ms: 10_000, on_error: "continue" },
        {
          id: "halt",
          type: "stop",
          if: "steps.charge.status == 'failed'",
          status: "failed",
          message: "refund {{ input.event.data.amount }} refused",
        },
        { id: "never", type: "http", url: url("/never") },
      ],
    });
    await Promise.all(nodes.filter((n) => n.name !== "api").map((n) => n.kill("SIGKILL")));
    for (const amount of [700, 10])
      expect((await api(gw, "POST", "/events", { key: admin, body: { type: "refund.requested", data: { amount } } })).status).toBe(201);
    const first = await workflowsNode("w6");
    await waitFor("the failing step in flight", () => hits.some((h) => h.path === "/refuse/700"), 30_000);
    await first.kill("SIGKILL");
    const killedAt = Date.now();
    await workflowsNode("w7");
    const runs = await eventuallyValue(
      "the run to end",
      async () => (await api(gw, "GET", `/workflows/${wf}/runs`, { key: admin })).body.data,
      (list: any[]) => list.length > 0 && list.every((r) => ["succeeded", "failed"].includes(r.status)),
      60_000,
    );
    expect(runs).toHaveLength(1);
    const done = await runOf(wf, runs[0].id);
    expect(done.status).toBe("failed");
    expect(done.stop_message).toBe("refund 700 refused");
    // A failing stop fails its own step (error `stopped`); the steps after it are skipped.
    expect(done.steps.map((s: any) => [s.status, s.error_code ?? null])).toEqual([
      ["failed", expect.any(String)],
      ["failed", "stopped"],
      ["skipped", null],
    ]);
    // The attempt cut by the kill was never stored; the one after it is, once.
    const refused = hits.filter((h) => h.path === "/refuse/700");
    expect(refused).toHaveLength(2);
    expect(refused[1].at).toBeGreaterThanOrEqual(killedAt);
    expect(done.steps[0].attempts.map((a: any) => a.status_code)).toEqual([500]);
    expect(hits.filter((h) => h.path.startsWith("/refuse/10")).length + hits.filter((h) => h.path === "/never").length).toBe(0);
  });
});
