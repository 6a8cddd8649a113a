import { QUOTAS } from "../../shared/records/quotas";
import { api } from "../helpers/platform";
import {
  freePort,
  runCli,
  saveClusterLogs,
  startNats,
  startNode,
  tempDir,
  waitForGateway,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";

/**
 * Count quotas with creations racing through two API processes over a real nats-server, on one
 * store: the creation and its count are one atomic write (shared/records/quotas.ts), so the
 * quota is exact however the requests interleave across processes.
 */
jest.setTimeout(120_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
const gateways: string[] = [];
let admin: string;

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  const common = { TRANSPORTER: nats.url, DATA_DIR: dir.path, WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RATE_LIMIT_MAX: "100000" };
  for (const name of ["api1", "api2"]) {
    const port = await freePort();
    nodes.push(startNode(name, { ...common, SERVICES: "gateway,auth,keys,orgs,events,webhooks,workflows", PORT: String(port) }));
    gateways.push(`http://127.0.0.1:${port}/v1`);
  }
  admin = runCli(["orgs", "create", "--name", "Quota Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
  for (const gw of gateways) await waitForGateway(gw, admin);
});

afterAll(async () => {
  saveClusterLogs("quota", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

/** `n` creations at once from 10 keys, alternating between the two gateways. */
async function burst(keys: string[], n: number, path: string, body: (i: number) => unknown) {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) => api(gateways[i % 2], "POST", path, { key: keys[i % keys.length], body: body(i) })),
  );
  const created = answers.filter((a) => a.status === 201).length;
  const refused = answers.filter((a) => a.status === 400 && a.body.error?.code === "quota_exceeded").length;
  const others = answers.filter((a) => a.status !== 201 && !(a.status === 400 && a.body.error?.code === "quota_exceeded"));
  if (others.length > 0)
    console.log(
      `${path}: answers other than 201 or quota_exceeded:`,
      others.slice(0, 3).map((a) => [a.status, a.body]),
    );
  return { created, refused, other: answers.length - created - refused };
}

it("holds the webhook and workflow quotas exactly with 200 and 260 creations racing through two processes", async () => {
  const keys: string[] = [];
  for (let i = 0; i < 10; i++) {
    const res = await api(gateways[0], "POST", "/api-keys", {
      key: admin,
      body: { name: `writer ${i}`, scopes: ["webhooks:write", "workflows:write"] },
    });
    expect(res.status).toBe(201);
    keys.push(res.body.data.key);
  }
  const webhooks = await burst(keys, 200, "/webhooks", (i) => ({ url: `http://127.0.0.1:9/hook/${i}`, events: ["order.created"] }));
  const workflows = await burst(keys, 260, "/workflows", (i) => ({
    name: `wf ${i}`,
    trigger: { type: "manual" },
    steps: [{ type: "delay", duration_ms: 1 }],
  }));
  console.log(
    `two API processes: 200 webhook creations, quota ${QUOTAS.webhooks_per_environment}: ${webhooks.created} created; ` +
      `260 workflow creations, quota ${QUOTAS.workflows_per_environment}: ${workflows.created} created`,
  );
  expect(webhooks).toEqual({ created: QUOTAS.webhooks_per_environment, refused: 200 - QUOTAS.webhooks_per_environment, other: 0 });
  expect(workflows).toEqual({ created: QUOTAS.workflows_per_environment, refused: 260 - QUOTAS.workflows_per_environment, other: 0 });
  expect((await api(gateways[1], "GET", "/webhooks?per_page=1", { key: admin })).body.meta.total).toBe(QUOTAS.webhooks_per_environment);
  expect((await api(gateways[1], "GET", "/workflows?per_page=1", { key: admin })).body.meta.total).toBe(QUOTAS.workflows_per_environment);
});
