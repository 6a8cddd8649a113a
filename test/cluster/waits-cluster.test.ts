import { createServer, type Server } from "node:http";
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
 * wait_for_event and cancel_on across real processes over a real nats-server, two workflows nodes
 * at a time: an event stored while the nodes that started the waiting runs are dead resumes (or
 * cancels) them once a node runs again, and one stored as they are SIGKILLed resumes its run once.
 */
jest.setTimeout(120_000);

let cluster: ApiCluster;
let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let gw: string;
let admin: string;
let target: Server;
let targetPort: number;
const hits: string[] = [];

beforeAll(async () => {
  target = createServer((req, res) => {
    hits.push(req.url ?? "");
    res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
  });
  await new Promise<void>((ok) => target.listen(0, "127.0.0.1", ok));
  targetPort = (target.address() as { port: number }).port;
  cluster = await startApiCluster(nodes, "Wait Co", { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
  ({ nats, dir, gw, admin } = cluster);
});

afterAll(async () => {
  saveClusterLogs("waits", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  target?.closeAllConnections();
  await new Promise((ok) => target?.close(ok));
  dir?.remove();
});

const workflowsNode = (name: string): Promise<NodeProc> => startWorkflowsNode(cluster, nodes, name);
const killWorkflowsNodes = () => Promise.all(nodes.filter((n) => n.name !== "api").map((n) => n.kill("SIGKILL")));
async function create(body: Record<string, unknown>) {
  const res = await api(gw, "POST", "/workflows", { key: admin, body: { name: "wf", trigger: { type: "manual" }, ...body } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
async function start(wf: string, input: Record<string, unknown>): Promise<string> {
  const res = await api(gw, "POST", `/workflows/${wf}/runs`, { key: admin, body: { input } });
  expect(res.status).toBe(201);
  return res.body.data.id;
}
async function runOf(wf: string, run: string) {
  let res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  for (let tries = 0; res.status !== 200 && tries < 40; tries += 1)
    res = await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data;
}
const reaches = (wf: string, run: string, status: string) =>
  waitFor(`run ${run} to be ${status}`, async () => (await runOf(wf, run)).status === status, 60_000);
const emit = async (type: string, data: Record<string, unknown>) => {
  const res = await api(gw, "POST", "/events", { key: admin, body: { type, data } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
};

describe("waits under SIGKILL", () => {
  let wf: string;
  let cancellable: string;

  beforeAll(async () => {
    await Promise.all([workflowsNode("w1"), workflowsNode("w2")]);
    wf = await create({
      steps: [
        { id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: { "data.order_id": "{{ input.order_id }}" } },
        { id: "ship", type: "http", url: `http://127.0.0.1:${targetPort}/ship/{{ input.order_id }}` },
      ],
    });
    cancellable = await create({
      cancel_on: [{ event_type: "order.cancelled", match: { "data.order_id": "{{ input.order_id }}" } }],
      steps: [{ id: "gate", type: "approval", message: "ship?" }],
    });
  });

  it("events stored while no workflows node runs resume and cancel the runs they match once a node starts", async () => {
    const paid = await start(wf, { order_id: "a1" });
    const other = await start(wf, { order_id: "a2" });
    const doomed = await start(cancellable, { order_id: "a1" });
    await reaches(wf, paid, "waiting");
    await reaches(wf, other, "waiting");
    await reaches(cancellable, doomed, "waiting");
    // The nodes that started them die; the events are stored with no workflows node to hear of them.
    await killWorkflowsNodes();
    const payment = await emit("payment.succeeded", { order_id: "a1" });
    const cancel = await emit("order.cancelled", { order_id: "a1" });
    await workflowsNode("w3");
    await reaches(wf, paid, "succeeded");
    await reaches(cancellable, doomed, "cancelled");
    const done = await runOf(wf, paid);
    expect(done.steps[0]).toMatchObject({ status: "succeeded", output: { id: payment } });
    expect(await runOf(cancellable, doomed)).toMatchObject({ cancel_reason: "cancel_on", cancel_event_id: cancel });
    expect(hits.filter((h) => h === "/ship/a1")).toHaveLength(1);
    // The same events were handled (they moved the runs above): the run of another order still waits.
    expect((await runOf(wf, other)).status).toBe("waiting");
  });

  it("an event stored as both workflows nodes are SIGKILLed resumes its run once, on the node that comes next", async () => {
    await workflowsNode("w4");
    const run = await start(wf, { order_id: "b1" });
    await reaches(wf, run, "waiting");
    const payment = emit("payment.succeeded", { order_id: "b1" });
    // Killed as the event is stored and handed to them: whatever was done of it stands, the rest is redone.
    await killWorkflowsNodes();
    const event = await payment;
    await workflowsNode("w5");
    await workflowsNode("w6");
    await reaches(wf, run, "succeeded");
    expect((await runOf(wf, run)).steps[0].output.id).toBe(event);
    expect(hits.filter((h) => h === "/ship/b1")).toHaveLength(1);
    const completed = (await api(gw, "GET", "/events?type=workflow.completed&per_page=100", { key: admin })).body.data;
    expect(completed.filter((e: any) => e.data.run_id === run)).toHaveLength(1);
  });

  it("a wait whose timeout falls due while no workflows node runs fails timed_out once one starts", async () => {
    await workflowsNode("w7");
    const brief = await create({
      steps: [
        {
          id: "pay",
          type: "wait_for_event",
          event_type: "payment.succeeded",
          match: { "data.order_id": "{{ input.order_id }}" },
          timeout_ms: 800,
        },
      ],
    });
    const run = await start(brief, { order_id: "c1" });
    await reaches(brief, run, "waiting");
    await killWorkflowsNodes();
    const killedAt = Date.now();
    // Real time passing is the subject: the timeout falls due while no workflows node runs.
    await waitFor("the timeout to pass", async () => Date.now() > killedAt + 1000, 10_000);
    await workflowsNode("w8");
    await reaches(brief, run, "failed");
    expect((await runOf(brief, run)).steps[0]).toMatchObject({ status: "failed", error_code: "timed_out" });
  });
});

describe("a type no run waited on, then waited on", () => {
  beforeAll(async () => {
    await killWorkflowsNodes();
    await Promise.all([workflowsNode("w9"), workflowsNode("w10")]);
  });

  it("an event handled by a node that had read no wait for its type resumes the runs that began waiting on another", async () => {
    for (let round = 0; round < 6; round += 1) {
      const type = `round${round}.paid`;
      const wf = await create({
        steps: [{ id: "pay", type: "wait_for_event", event_type: type, match: { "data.order_id": "{{ input.order_id }}" } }],
      });
      // Both nodes handle events of the type while no run waits on it: a node that kept that answer
      // would miss the runs below (decision 0180).
      for (let i = 0; i < 6; i += 1) await emit(type, { order_id: "nobody" });
      // Two runs at once: one makes the type's shape live, the other may find it being made live.
      const runs = await Promise.all([start(wf, { order_id: `${round}-a` }), start(wf, { order_id: `${round}-b` })]);
      await Promise.all(runs.map((run) => reaches(wf, run, "waiting")));
      await Promise.all([emit(type, { order_id: `${round}-a` }), emit(type, { order_id: `${round}-b` })]);
      await Promise.all(runs.map((run) => reaches(wf, run, "succeeded")));
    }
  });
});
