import { api } from "../helpers/platform";
import {
  saveClusterLogs,
  waitFor,
  type NatsServer,
  type NodeProc,
  startApiCluster,
  startWorkflowsNode,
  type ApiCluster,
} from "../helpers/cluster";

/**
 * A map step across real processes over a real nats-server: the node driving the parent is
 * SIGKILLed while its children run, and the other node finishes the map with every item run once.
 */
jest.setTimeout(180_000);

let cluster: ApiCluster;
let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;

beforeAll(async () => {
  cluster = await startApiCluster(nodes, "Map Co");
  ({ nats, dir, gw, admin } = cluster);
});

afterAll(async () => {
  saveClusterLogs("map", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

const workflowsNode = (name: string): Promise<NodeProc> => startWorkflowsNode(cluster, nodes, name);
async function runOf(wf: string, run: string) {
  let res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  for (let tries = 0; res.status !== 200 && tries < 40; tries += 1)
    res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data;
}
async function childrenOf(run: string): Promise<any[]> {
  const res = await api(gw, "GET", `/runs?parent_run_id=${run}&per_page=100`, { key: admin });
  return res.status === 200 ? res.body.data : [];
}

describe("map under SIGKILL", () => {
  it("a map whose parent's node is killed while its children run finishes on the other node, each item run once", async () => {
    // w1 alone drives the parent: the parent's node is w1.
    const w1 = await workflowsNode("w1");
    const items = Array.from({ length: 60 }, (_, n) => n);
    const res = await api(gw, "POST", "/workflows", {
      key: admin,
      body: {
        name: "map",
        trigger: { type: "manual" },
        steps: [
          {
            id: "each",
            type: "map",
            items: "{{ input.items }}",
            max_concurrency: 3,
            steps: [
              { id: "nap", type: "delay", duration_ms: 500 },
              { id: "out", type: "set", output: "{{ input.item * 10 }}" },
            ],
          },
        ],
      },
    });
    expect(res.status).toBe(201);
    const wf = res.body.data.id as string;
    const run = (await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: { input: { items } } })).body.data.id as string;
    await waitFor("some children to have ended", async () => (await childrenOf(run)).filter((c) => c.status === "succeeded").length >= 5);
    await workflowsNode("w2");
    const before = await runOf(wf, run);
    await w1.kill("SIGKILL");
    // Killed mid-map: the parent was waiting on its children, with items still to run.
    expect(before.status).toBe("waiting");
    expect(before.steps[0].output.succeeded).toBeLessThan(60);
    await waitFor(`run ${run} to end`, async () => ["succeeded", "failed", "cancelled"].includes((await runOf(wf, run)).status), 120_000);
    const done = await runOf(wf, run);
    expect(done.status).toBe("succeeded");
    expect(done.steps[0].output).toMatchObject({ count: 60, succeeded: 60, failed: 0, results: items.map((n) => n * 10) });
    const children = await childrenOf(run);
    // Each item's child once: no index twice, none missing, each succeeded.
    expect(children.map((c) => c.parent.index).sort((a, b) => a - b)).toEqual(items);
    expect(children.every((c) => c.status === "succeeded")).toBe(true);
  });
});
