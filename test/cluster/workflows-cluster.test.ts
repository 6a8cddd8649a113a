import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { Webhook } from "standardwebhooks";

import { api } from "../helpers/platform";
import {
  connectionsOf,
  freePort,
  runCli,
  startNats,
  startNode,
  tempDir,
  waitFor,
  saveClusterLogs,
  waitForGateway,
  waitForNodes,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";

/**
 * Durable runs across real processes over a real nats-server: one node with the API,
 * two workflows nodes, one of them killed with SIGKILL in the middle of a run's http step.
 */
jest.setTimeout(120_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;
let common: Record<string, string>;

/** The http steps' target: counts requests by path; `/slow` answers after 1.5 s. */
let target: Server;
let targetPort: number;
const hits: { path: string; at: number; port: number; headers: IncomingHttpHeaders; body: string }[] = [];
/** Each workflow's signing secret, as its creation showed it. */
const signingSecrets = new Map<string, string>();

beforeAll(async () => {
  target = createServer((req, res) => {
    const hit = { path: req.url ?? "", at: Date.now(), port: req.socket.remotePort ?? -1, headers: req.headers, body: "" };
    hits.push(hit);
    req.on("data", (c: Buffer) => (hit.body += c.toString()));
    const answer = () => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    if (req.url?.startsWith("/slow")) setTimeout(answer, 1500);
    else if (req.url?.startsWith("/drain")) setTimeout(answer, 1000);
    else answer();
  });
  await new Promise<void>((ok) => target.listen(0, "127.0.0.1", ok));
  targetPort = (target.address() as { port: number }).port;

  nats = await startNats();
  dir = tempDir();
  common = {
    TRANSPORTER: nats.url,
    DATA_DIR: dir.path,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    RATE_LIMIT_MAX: "100000",
    SECRETS_KEYS: `k1:${randomBytes(32).toString("base64")}`,
  };
  const port = await freePort();
  nodes.push(startNode("api", { ...common, SERVICES: "gateway,auth,keys,orgs,events,webhooks", PORT: String(port) }));
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Runs Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
  for (const name of ["w1", "w2"]) nodes.push(startNode(name, { ...common, SERVICES: "workflows" }));
  await waitFor("the workflows service", async () => (await api(gw, "GET", "/workflows", { key: admin })).status === 200);
});

afterAll(async () => {
  saveClusterLogs("workflows", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  target?.closeAllConnections();
  await new Promise((ok) => target?.close(ok));
  dir?.remove();
});

const url = (path: string) => `http://127.0.0.1:${targetPort}${path}`;
async function createWorkflow(steps: unknown[]) {
  const res = await api(gw, "POST", "/workflows", { key: admin, body: { name: "wf", trigger: { type: "manual" }, steps } });
  expect(res.status).toBe(201);
  signingSecrets.set(res.body.data.id, res.body.data.signing_secret);
  return res.body.data.id as string;
}
/**
 * A run as the API shows it. Right after a SIGKILL, requests the broker balances to the dead node
 * fail until its heartbeats are missed (HEARTBEAT_TIMEOUT): read again until one answers.
 */
async function runOf(wf: string, run: string) {
  let res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  for (let tries = 0; res.status !== 200 && tries < 40; tries += 1)
    res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data;
}

describe("durable runs over NATS", () => {
  it("two workflows nodes share runs and never execute one twice", async () => {
    const wf = await createWorkflow([
      { type: "http", method: "GET", url: url("/count/{{input.n}}") },
      { type: "delay", duration_ms: 50 },
    ]);
    const runs: string[] = [];
    for (let n = 0; n < 30; n += 1)
      runs.push((await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: { input: { n } } })).body.data.id);
    await waitFor(
      "every run to succeed",
      async () => (await Promise.all(runs.map((r) => runOf(wf, r)))).every((r) => r.status === "succeeded"),
      30_000,
    );
    const counted = hits.filter((h) => h.path.startsWith("/count/")).map((h) => h.path);
    expect(counted.sort()).toEqual(Array.from({ length: 30 }, (_, n) => `/count/${n}`).sort());
  });

  it("a node killed mid-step: another takes the run over and it finishes exactly once", async () => {
    const token = `cluster-${randomBytes(8).toString("hex")}`;
    expect((await api(gw, "POST", "/secrets", { key: admin, body: { name: "CLUSTER_TOKEN", value: token } })).status).toBe(201);
    const wf = await createWorkflow([
      { id: "first", type: "http", url: url("/first") },
      {
        id: "slow",
        type: "http",
        url: url("/slow"),
        timeout_ms: 3000,
        headers: { "x-token": "{{secrets.CLUSTER_TOKEN}}" },
        body: { n: 1 },
      },
      { id: "tell", type: "emit", event_type: "run.resumed", data: { from: "{{steps.slow.output.body.ok}}" } },
      { id: "after", type: "http", url: url("/after") },
    ]);
    const run = (await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: {} })).body.data.id as string;
    await waitFor("the slow step to be in flight", () => hits.some((h) => h.path === "/slow"), 20_000);
    // The node executing the run is the one whose connection carried the slow request.
    const slowPort = hits.find((h) => h.path === "/slow")!.port;
    const holder = nodes.filter((n) => n.name !== "api").find((n) => connectionsOf(n.child.pid!, targetPort).has(slowPort));
    expect(holder).toBeDefined();
    await holder!.kill("SIGKILL");
    const killedAt = Date.now();

    const failures: string[] = [];
    await waitFor(
      "the run to end",
      async () => {
        const res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
        if (res.status !== 200) failures.push(`${res.status} ${res.body?.error?.code}`);
        return ["succeeded", "failed", "cancelled"].includes(res.body?.data?.status);
      },
      60_000,
    );
    const done = await runOf(wf, run);
    expect(done.status).toBe("succeeded");
    expect(done.steps.map((s: any) => s.status)).toEqual(["succeeded", "succeeded", "succeeded", "succeeded"]);
    const count = (path: string) => hits.filter((h) => h.path === path).length;
    expect(count("/first")).toBe(1);
    // The step in flight when its node died runs again (at least once), only after the kill.
    const slow = hits.filter((h) => h.path === "/slow");
    expect(slow).toHaveLength(2);
    expect(slow[1].at).toBeGreaterThanOrEqual(killedAt);
    // The re-execution is the same step to its receiver: one Idempotency-Key and webhook-id, both
    // signed under the workflow's secret (verified with the stock library), the secret's value sent.
    expect(slow.map((h) => h.headers["idempotency-key"])).toEqual([`${run}:slow`, `${run}:slow`]);
    expect(slow.map((h) => h.headers["webhook-id"])).toEqual([`${run}:slow`, `${run}:slow`]);
    for (const h of slow) {
      expect(() => new Webhook(signingSecrets.get(wf)!).verify(h.body, h.headers as Record<string, string>)).not.toThrow();
      expect(h.headers["x-token"]).toBe(token);
    }
    expect(JSON.stringify(done)).not.toContain(token);
    for (const n of nodes) expect({ node: n.name, leaks: n.output().includes(token) }).toEqual({ node: n.name, leaks: false });
    expect(count("/after")).toBe(1);
    const events = async (type: string) => (await api(gw, "GET", `/events?type=${type}&per_page=100`, { key: admin })).body.data;
    await waitFor("workflow.completed", async () => (await events("workflow.completed")).some((e: any) => e.data.run_id === run));
    expect((await events("workflow.completed")).filter((e: any) => e.data.run_id === run).map((e: any) => e.data.status)).toEqual([
      "succeeded",
    ]);
    expect((await events("run.resumed")).map((e: any) => e.data)).toEqual([{ from: true }]);
    console.log(
      `kill test: run ${run} resumed ${((slow[1].at - killedAt) / 1000).toFixed(1)} s after the SIGKILL (the claim's time-out); ` +
        `reads that failed meanwhile: ${failures.length} (${[...new Set(failures)].join(", ")})`,
    );
  });

  it("a node stopped with SIGTERM finishes its step and hands the run over at once", async () => {
    const live = nodes.filter((n) => n.name !== "api" && n.child.exitCode === null && n.child.signalCode === null);
    // The kill test above took one node down: start another so two share the work again.
    if (live.length < 2) {
      const metricsPort = await freePort();
      nodes.push(startNode("w3", { ...common, SERVICES: "workflows", METRICS_PORT: String(metricsPort) }));
      // Started, and it knows the other workflows node (a new node learns only of live ones).
      await waitForNodes(`http://127.0.0.1:${metricsPort}/metrics`, "workflows", 2);
    }
    const wf = await createWorkflow([
      { id: "drain", type: "http", url: url("/drain"), timeout_ms: 5000 },
      { id: "next", type: "http", url: url("/next") },
    ]);
    const run = (await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: {} })).body.data.id as string;
    await waitFor("the drain step to be in flight", () => hits.some((h) => h.path === "/drain"), 20_000);
    const drainPort = hits.find((h) => h.path === "/drain")!.port;
    const holder = nodes
      .filter((n) => n.name !== "api" && n.child.exitCode === null && n.child.signalCode === null)
      .find((n) => connectionsOf(n.child.pid!, targetPort).has(drainPort));
    expect(holder).toBeDefined();
    const signalled = Date.now();
    const stopped = holder!.kill("SIGTERM");
    await waitFor("the run to end", async () => (await runOf(wf, run)).status === "succeeded", 30_000);
    await stopped;
    expect(holder!.child.exitCode).toBe(0);
    // The step in flight was finished by the stopping node, not repeated; the next one ran once,
    // soon after (the run was handed back, not left to its claim's time-out of 10 s).
    expect(hits.filter((h) => h.path === "/drain")).toHaveLength(1);
    const next = hits.filter((h) => h.path === "/next");
    expect(next).toHaveLength(1);
    expect(next[0].at - signalled).toBeLessThan(5000);
    console.log(`graceful stop: the next step ran ${next[0].at - signalled} ms after SIGTERM`);
  });
});
