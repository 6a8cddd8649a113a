import { api } from "../helpers/platform";
import { startHoldTarget, type HoldTarget } from "../helpers/hold-target";
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
 * Concurrency 1 per key across two workflows nodes over a real nats-server, one of them SIGKILLed
 * while runs are in flight: never two runs of one key at once, every run started ends.
 */
jest.setTimeout(120_000);

let cluster: ApiCluster;
let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;
let target: HoldTarget;

beforeAll(async () => {
  target = await startHoldTarget();
  cluster = await startApiCluster(nodes, "Flow Co", { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RUN_STARTS_PER_MINUTE: "100000" });
  ({ nats, dir, gw, admin } = cluster);
});

afterAll(async () => {
  saveClusterLogs("flow-control", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  await target?.close();
  dir?.remove();
});

const workflowsNode = (name: string): Promise<NodeProc> => startWorkflowsNode(cluster, nodes, name);

describe("concurrency per key across nodes", () => {
  it("never runs two of one key at once, and loses none, with a node SIGKILLed mid-run", async () => {
    // w1 alone takes the first runs; w2 joins, then w1 is killed with them in flight.
    const first = await workflowsNode("w1");
    const created = await api(gw, "POST", "/workflows", {
      key: admin,
      body: {
        name: "per customer",
        trigger: { type: "manual" },
        concurrency: { limit: 1, key: "{{ input.customer }}" },
        // A short attempt: the killed node's run is claimed again soon after its lease lapses.
        steps: [{ id: "call", type: "http", method: "POST", url: `${target.url}/{{ input.customer }}/{{ run.id }}`, timeout_ms: 2000 }],
      },
    });
    expect(created.status).toBe(201);
    const wf = created.body.data.id as string;
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1)
      for (const customer of ["a", "b"]) {
        const res = await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: { input: { customer, i } } });
        expect(res.status).toBe(201);
        ids.push(res.body.data.id);
      }
    await waitFor("one run of each key in flight", () => target.open.get("a") === 1 && target.open.get("b") === 1, 30_000);
    const inFlight = [...target.arrivals];
    await workflowsNode("w2");
    await first.kill("SIGKILL");
    // Each request answered as it comes (a run the killed node held comes again from w2).
    let statuses: string[] = [];
    await waitFor(
      "every run to end",
      async () => {
        target.release();
        statuses = await Promise.all(
          ids.map(async (id) => (await api(gw, "GET", `/workflows/${wf}/runs/${id}`, { key: admin })).body.data.status as string),
        );
        return statuses.every((s) => !["queued", "running", "waiting"].includes(s));
      },
      60_000,
    );
    expect(target.most.get("a")).toBe(1);
    expect(target.most.get("b")).toBe(1);
    // None lost: each run reached the target and succeeded.
    for (const id of ids) expect(target.arrivals.some((a) => a.endsWith(`/${id}`))).toBe(true);
    expect(statuses).toEqual(ids.map(() => "succeeded"));
    // The runs w1 was driving were sent again by w2 once their claims lapsed.
    for (const arrival of inFlight) expect(target.arrivals.filter((a) => a === arrival).length).toBeGreaterThanOrEqual(2);
  });
});
