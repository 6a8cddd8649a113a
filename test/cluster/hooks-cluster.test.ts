import { createHmac, randomUUID } from "node:crypto";
import { api } from "../helpers/platform";
import {
  freePort,
  runCli,
  saveClusterLogs,
  startNats,
  startNode,
  tempDir,
  waitFor,
  waitForGateway,
  waitForNodes,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";

/**
 * Inbound webhooks across real processes over NATS: one API node and two workflows nodes, each
 * verifying from its own memory of the hook. What one node changes reaches the other before the
 * answer reaches the client; a provider's retries reaching both nodes at once start one run.
 */
jest.setTimeout(120_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  const common = { TRANSPORTER: nats.url, DATA_DIR: dir.path, RATE_LIMIT_MAX: "100000" };
  const port = await freePort();
  const metricsPort = await freePort();
  nodes.push(
    startNode("api", {
      ...common,
      SERVICES: "gateway,auth,keys,orgs,events,webhooks",
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
    }),
  );
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Hooks Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
  for (const name of ["w1", "w2"]) nodes.push(startNode(name, { ...common, SERVICES: "workflows" }));
  await waitForNodes(`http://127.0.0.1:${metricsPort}/metrics`, "workflows", 2);
});

afterAll(async () => {
  saveClusterLogs("hooks", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

const github = (secret: string, raw: string) => ({
  "content-type": "application/json",
  "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`,
});
const send = (url: string, raw: string, headers: Record<string, string>) => api(gw, "POST", url.replace(/^\/v1/, ""), { raw, headers });

async function hookWorkflow(trigger: Record<string, unknown>) {
  const res = await api(gw, "POST", "/workflows", { key: admin, body: { name: "inbound", trigger, steps: [{ type: "set", output: {} }] } });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; hook: { url: string }; hook_secret: string };
}

describe("inbound webhooks over two workflows nodes", () => {
  it("takes a rotated secret, and refuses a retired one and a changed scheme's, on every node at once", async () => {
    const wf = await hookWorkflow({ type: "webhook", verify: { scheme: "github" } });
    const raw = "{}";
    // Both nodes' memories hold the hook (calls are balanced between them).
    for (let i = 0; i < 10; i++) expect((await send(wf.hook.url, raw, github(wf.hook_secret, raw))).status).toBe(202);
    const rotate = () => api(gw, "POST", `/workflows/${wf.id}/hook/rotate-secret`, { key: admin });
    const answers = async (secret: string) => {
      const statuses = [];
      for (let i = 0; i < 10; i++) statuses.push((await send(wf.hook.url, raw, github(secret, raw))).status);
      return [...new Set(statuses)];
    };
    // One node rotates; the other knew only the first secret until told.
    const second = (await rotate()).body.data.secret as string;
    expect(await answers(second)).toEqual([202]);
    expect(await answers(wf.hook_secret)).toEqual([202]);
    const third = (await rotate()).body.data.secret as string;
    expect(await answers(wf.hook_secret)).toEqual([401]);
    expect(await answers(second)).toEqual([202]);
    expect(await answers(third)).toEqual([202]);
    // A scheme changed by PATCH on one node: the other no longer reads GitHub's header.
    const patched = await api(gw, "PATCH", `/workflows/${wf.id}`, {
      key: admin,
      body: { trigger: { type: "webhook", verify: { scheme: "hmac_sha256", header: "x-other", prefix: "sha256=" } } },
    });
    expect(patched.status).toBe(200);
    expect(await answers(third)).toEqual([401]);
    const other = (secret: string) => ({ ...github(secret, raw), "x-other": github(secret, raw)["x-hub-signature-256"] });
    expect((await send(wf.hook.url, raw, other(third))).status).toBe(202);
    const deactivated = await api(gw, "PATCH", `/workflows/${wf.id}`, { key: admin, body: { status: "inactive" } });
    expect(deactivated.status).toBe(200);
    expect(await answers(third)).toEqual([404]);
  });

  it("starts one run for copies of one message reaching both nodes at once", async () => {
    const wf = await hookWorkflow({ type: "webhook", verify: { scheme: "github" }, dedupe: { header: "x-github-delivery" } });
    const raw = JSON.stringify({ action: "opened" });
    const headers = { ...github(wf.hook_secret, raw), "x-github-delivery": randomUUID() };
    const copies = await Promise.all(Array.from({ length: 12 }, () => send(wf.hook.url, raw, headers)));
    const runIds = new Set(copies.map((c) => c.body.data.run_id));
    expect(runIds.size).toBe(1);
    expect(copies.filter((c) => c.status === 202)).toHaveLength(1);
    expect(copies.filter((c) => c.status === 200 && c.body.data.duplicate)).toHaveLength(11);
    const runs = await api(gw, "GET", `/workflows/${wf.id}/runs`, { key: admin });
    expect(runs.body.data.map((r: { id: string }) => r.id)).toEqual([...runIds]);
  });
});
