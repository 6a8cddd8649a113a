import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { DATABASE_FILE } from "../../shared/storage/sqlite";
import { eventually } from "../../tools/eventually";
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
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";

/**
 * Bulk jobs across real processes over a real nats-server: the workflows node driving a job is
 * SIGKILLed part-way, and the job goes on on another node (once the dead node's lease on it runs
 * out), acting on every run its filter picked exactly once.
 */
jest.setTimeout(240_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;
let common: Record<string, string>;

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  common = { TRANSPORTER: nats.url, DATA_DIR: dir.path, RATE_LIMIT_MAX: "1000000", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };
  const port = await freePort();
  nodes.push(startNode("api", { ...common, SERVICES: "gateway,auth,keys,orgs,events,webhooks", PORT: String(port) }));
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Bulk Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
});

afterAll(async () => {
  saveClusterLogs("bulk", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

const call = (method: string, path: string, body?: unknown) => api(gw, method, path, { key: admin, body });

async function workflowsNode(name: string): Promise<NodeProc> {
  const node = startNode(name, { ...common, SERVICES: "workflows" });
  nodes.push(node);
  await waitFor(`${name} to serve`, async () => (await call("GET", "/workflows")).status === 200, 30_000);
  return node;
}
async function create(steps: unknown[]) {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
async function startMany(wf: string, n: number) {
  for (let i = 0; i < n; i += 25)
    await Promise.all(Array.from({ length: 25 }, async () => expect((await call("POST", `/workflows/${wf}/runs`, {})).status).toBe(201)));
}
const total = async (wf: string, status: string) =>
  (await call("GET", `/workflows/${wf}/runs?status=${status}&per_page=1`)).body.meta?.total;
/** Every run of `wf` (newest first, page by page along the index). */
async function allRuns(wf: string): Promise<any[]> {
  const runs: any[] = [];
  for (let after = ""; ;) {
    const page = (await call("GET", `/workflows/${wf}/runs?limit=100${after && `&starting_after=${after}`}`)).body;
    runs.push(...page.data);
    if (!page.meta.has_more) return runs;
    after = page.data.at(-1).id;
  }
}

/** The job as stored (read from the store's file, as another process may): the batch it holds shows a node part-way through one. */
function storedJob(id: string): { done: number; batch?: string[] } {
  const db = new DatabaseSync(join(dir.path, DATABASE_FILE), { readOnly: true });
  try {
    const row = db.prepare("SELECT doc FROM workflow_bulk_jobs WHERE id = ?").get(id) as { doc: string } | undefined;
    return row ? JSON.parse(row.doc) : { done: 0 };
  } finally {
    db.close();
  }
}

/**
 * Starts the job on the node `w`, kills `w` while it acts on a batch after the first (the batch
 * stored on the job, the counts of the one before too), and follows the job to its end on `next`.
 */
async function killedMidJob(body: unknown, w: NodeProc, next: string) {
  const res = await call("POST", "/runs/bulk", body);
  expect(res.status).toBe(202);
  const id = res.body.data.id as string;
  await eventually(
    "a batch after the first under way",
    () => {
      const job = storedJob(id);
      return job.done > 0 && (job.batch?.length ?? 0) > 0;
    },
    30_000,
    2,
  );
  await w.kill("SIGKILL");
  const left = storedJob(id);
  // Killed part-way: a batch stored and not finished, some runs done before it.
  expect(left.batch?.length).toBeGreaterThan(0);
  expect(left.done).toBeLessThan(300);
  await workflowsNode(next);
  let job: any;
  await waitFor(
    "the job to end on the other node",
    async () => {
      job = (await call("GET", `/runs/bulk/${id}`)).body.data;
      return job.status !== "running";
    },
    90_000,
  );
  return job;
}

describe("bulk jobs under SIGKILL", () => {
  it("a bulk cancel of 300 runs goes on on another node and cancels each run once", async () => {
    const w1 = await workflowsNode("w1");
    const wf = await create([{ id: "gate", type: "approval" }]);
    await startMany(wf, 300);
    await waitFor("300 runs waiting", async () => (await total(wf, "waiting")) === 300, 60_000);
    const job = await killedMidJob({ action: "cancel", filter: { workflow_id: wf } }, w1, "w2");
    expect(job).toMatchObject({ status: "succeeded", total: 300, matched: 300, done: 300, failed: 0 });
    const runs = await allRuns(wf);
    expect(runs).toHaveLength(300);
    expect(runs.every((r) => r.status === "cancelled" && r.cancel_reason === "requested")).toBe(true);
  });

  it("a bulk retry of 300 failed runs goes on on another node and retries each run once", async () => {
    const w = nodes.find((n) => n.name === "w2")!;
    // Nothing listens there: each attempt fails at once, so a run retried twice would show attempt 3.
    const closed = `http://127.0.0.1:${await freePort()}/nothing`;
    const wf = await create([{ id: "call", type: "http", method: "POST", url: closed, retries: 0 }]);
    await startMany(wf, 300);
    await waitFor("300 runs failed", async () => (await total(wf, "failed")) === 300, 90_000);
    const job = await killedMidJob({ action: "retry", filter: { workflow_id: wf, failed_step: "call" } }, w, "w3");
    expect(job).toMatchObject({ status: "succeeded", matched: 300, done: 300, failed: 0 });
    await waitFor("the retried runs failed again", async () => (await total(wf, "failed")) === 300, 60_000);
    const attempts = (await allRuns(wf)).map((r) => r.attempt);
    expect(attempts).toEqual(Array.from({ length: 300 }, () => 2));
  });
});
