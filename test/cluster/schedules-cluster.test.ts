import { api } from "../helpers/platform";
import { saveClusterLogs, startNode, waitFor, type NatsServer, type NodeProc, startApiCluster, type ApiCluster } from "../helpers/cluster";

/**
 * A schedule ticking every second over two workflows nodes of real processes on a real
 * nats-server, through SIGKILLs: every tick starts exactly one run, whichever node moves it, and
 * the ticks that fell due while no workflows node ran are started late once one is back.
 */
jest.setTimeout(120_000);

let cluster: ApiCluster;
let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;
let common: Record<string, string>;

beforeAll(async () => {
  cluster = await startApiCluster(nodes, "Clock Co");
  ({ nats, dir, common, gw, admin } = cluster);
});

afterAll(async () => {
  saveClusterLogs("schedules", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

function workflowsNode(name: string): NodeProc {
  const node = startNode(name, { ...common, SERVICES: "workflows" });
  nodes.push(node);
  return node;
}

/** Every run of the workflow, by cursor pages. */
async function runsOf(wf: string): Promise<{ id: string; trigger: { scheduled_at: string; source: string } }[]> {
  const all = [];
  let after = "";
  for (;;) {
    const res = await api(gw, "GET", `/workflows/${wf}/runs?limit=100${after && `&starting_after=${after}`}`, { key: admin });
    if (res.status !== 200) throw new Error(`GET runs: ${res.status}`);
    all.push(...res.body.data);
    if (!res.body.meta.has_more) return all;
    after = res.body.data.at(-1).id;
  }
}
const ticksOf = async (wf: string) => (await runsOf(wf)).map((r) => Date.parse(r.trigger.scheduled_at));
async function moreTicks(wf: string, than: number, what: string): Promise<number> {
  let n = 0;
  await waitFor(what, async () => (n = (await runsOf(wf)).length) >= than, 60_000);
  return n;
}

describe("a schedule of every_ms 1000 under SIGKILL", () => {
  it("starts one run per tick over two nodes, none doubled, and fills the gap a stop of every node left", async () => {
    const w1 = workflowsNode("w1");
    workflowsNode("w2");
    await waitFor("a workflows node to serve", async () => (await api(gw, "GET", "/workflows", { key: admin })).status === 200, 30_000);
    const ids: string[] = [];
    for (const name of ["a", "b"]) {
      const res = await api(gw, "POST", "/workflows", {
        key: admin,
        body: {
          name,
          trigger: { type: "schedule", every_ms: 1000, overlap: "allow", input: { name } },
          steps: [{ id: "noted", type: "set", output: "{{ input.name }}" }],
        },
      });
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
    const [a, b] = ids;
    let seen = await moreTicks(a, 3, "three ticks on two nodes");

    await w1.kill("SIGKILL");
    seen = await moreTicks(a, seen + 3, "three ticks after w1 was killed");
    workflowsNode("w1-again");
    await moreTicks(a, seen + 3, "three ticks with w1 back");

    // Every workflows node killed at once: the ticks of the next seconds fall due with none running.
    await Promise.all(nodes.filter((n) => n.name.startsWith("w")).map((n) => n.kill("SIGKILL")));
    const killedAt = Date.now();
    // Real time passing is the subject: at least three ticks fall due while no workflows node runs.
    await waitFor("three ticks to pass", () => Date.now() > killedAt + 4500, 10_000);
    workflowsNode("w3");
    await waitFor(
      "the ticks of the gap",
      async () => (await ticksOf(a)).filter((t) => t > killedAt && t < killedAt + 4000).length >= 3,
      60_000,
    );
    await moreTicks(a, (await runsOf(a)).length + 2, "two ticks after the gap");

    for (const id of ids)
      expect((await api(gw, "PATCH", `/workflows/${id}`, { key: admin, body: { status: "inactive" } })).status).toBe(200);
    for (const id of [a, b]) {
      const runs = await runsOf(id);
      const ticks = runs.map((r) => Date.parse(r.trigger.scheduled_at)).sort((x, y) => x - y);
      // None doubled, none lost: one run for each second from the first tick to the last.
      expect(new Set(ticks).size).toBe(ticks.length);
      expect(ticks.length).toBe((ticks.at(-1)! - ticks[0]) / 1000 + 1);
      expect(runs.every((r) => r.trigger.source === "tick")).toBe(true);
    }
    const schedule = (await api(gw, "GET", `/workflows/${a}/schedule`, { key: admin })).body.data;
    expect(schedule.missed_count).toBe(0);
  });
});
