import { api } from "../helpers/platform";
import {
  clusterLogLevel,
  connectionsOf,
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
import { startReceiver, type Received, type Receiver } from "../helpers/receiver";

/**
 * map and parallel across real processes: an API node, the events service on a node of its own
 * (so a test can freeze it), and two workflows nodes over a real nats-server, with http steps
 * sent to a real receiver. The node holding a fan-out is SIGKILLed at its worst moment, and the
 * receiver's record shows every child's request, when it was open and whether it was answered.
 */
jest.setTimeout(120_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
let common: Record<string, string>;
const nodes: NodeProc[] = [];
/** The workflows nodes alive, in the order they started. */
const live: NodeProc[] = [];
let events: NodeProc;
let gw: string;
let admin: string;
let rx: Receiver;

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  rx = await startReceiver();
  common = {
    ...clusterLogLevel(),
    TRANSPORTER: nats.url,
    DATA_DIR: dir.path,
    RATE_LIMIT_MAX: "100000",
    RUN_STARTS_PER_MINUTE: "100000",
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  };
  const port = await freePort();
  nodes.push(startNode("api", { ...common, SERVICES: "gateway,auth,keys,orgs,webhooks", PORT: String(port) }));
  events = startNode("events", { ...common, SERVICES: "events" });
  nodes.push(events);
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Fan Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
  await workflowsNode("w1");
});

afterAll(async () => {
  saveClusterLogs("fan-out", nodes);
  events?.child.kill("SIGCONT");
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await rx?.close();
  await nats?.stop();
  dir?.remove();
});

async function workflowsNode(name: string): Promise<NodeProc> {
  const node = startNode(name, { ...common, SERVICES: "workflows" });
  nodes.push(node);
  live.push(node);
  await waitFor(`${name} to serve`, async () => (await api(gw, "GET", "/workflows", { key: admin })).status === 200, 30_000);
  return node;
}

async function kill(node: NodeProc): Promise<void> {
  live.splice(live.indexOf(node), 1);
  await node.kill("SIGKILL");
}

/** The live workflows node whose connections to the receiver carried the most of `requests`. */
function senderOf(requests: Received[]): NodeProc {
  const count = (n: NodeProc) => {
    const ports = connectionsOf(n.child.pid as number, rx.port);
    return requests.filter((r) => ports.has(r.fromPort)).length;
  };
  const best = [...live].sort((a, b) => count(b) - count(a))[0];
  expect(count(best)).toBeGreaterThan(0);
  return best;
}

async function create(steps: unknown[]): Promise<{ id: string; signing_secret: string }> {
  const res = await api(gw, "POST", "/workflows", { key: admin, body: { name: "fan", trigger: { type: "manual" }, steps } });
  expect(res.status).toBe(201);
  return res.body.data;
}

/** A GET through the gateway, or null while it answers otherwise (a call routed to a node just killed). */
async function get(path: string): Promise<any> {
  const res = await api(gw, "GET", path, { key: admin });
  return res.status === 200 ? res.body : null;
}

async function childrenOf(run: string): Promise<any[]> {
  const all: any[] = [];
  let after = "";
  for (;;) {
    let page: any = null;
    await waitFor(`the children of ${run}`, async () => (page = await get(`/runs?parent_run_id=${run}&limit=100${after}`)) !== null);
    all.push(...page.data);
    if (!page.meta.has_more) return all;
    after = `&starting_after=${page.data[page.data.length - 1].id}`;
  }
}

async function runOf(wf: string, run: string): Promise<any> {
  let body: any = null;
  await waitFor(`run ${run}`, async () => (body = await get(`/workflows/${wf}/runs/${run}`)) !== null);
  return body.data;
}

async function ended(wf: string, run: string, timeoutMs: number): Promise<any> {
  let body: any = null;
  await waitFor(
    `run ${run} to end`,
    async () => ["succeeded", "failed", "cancelled"].includes((body = await get(`/workflows/${wf}/runs/${run}`))?.data.status),
    timeoutMs,
  );
  return body.data;
}

/** The most requests open at one instant (an end and a start in the same millisecond: the end first). */
function mostAtOnce(requests: Received[]): number {
  const edges: [number, number][] = requests.flatMap((r): [number, number][] => [
    [r.at, 1],
    [r.endedAt ?? Infinity, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, step] of edges) most = Math.max(most, (open += step));
  return most;
}

const open = (path: string) => rx.byPath(path).filter((r) => r.endedAt === undefined);

describe("map over two workflows nodes", () => {
  it("1,000 items at max_concurrency 10: never more than 10 requests open, each item answered once, through a SIGKILL and a restart", async () => {
    const N = 1000;
    const HOLD_MS = 20;
    // `/map` takes this one parent's children. While `gate` is set, requests are held until it
    // opens: the kill finds every child of the map mid-request.
    let gate: Promise<void> | null = null;
    rx.behave("/map", () => (gate ? { gate, standardOnly: true } : { delayMs: HOLD_MS, standardOnly: true }));
    const wf = await create([
      {
        id: "each",
        type: "map",
        items: "{{ input.items }}",
        max_concurrency: 10,
        steps: [
          { id: "call", type: "http", method: "POST", url: rx.url("/map"), body: { i: "{{ input.index }}" }, timeout_ms: 2000 },
          { id: "out", type: "set", output: "{{ input.item }}" },
        ],
      },
    ]);
    rx.setSecret("/map", wf.signing_secret);
    const items = Array.from({ length: N }, (_, n) => n);
    const started = await api(gw, "POST", `/workflows/${wf.id}/runs`, { key: admin, body: { input: { items } } });
    expect(started.status).toBe(201);
    const run = started.body.data.id as string;
    const answered = () => rx.byPath("/map").filter((r) => r.answered).length;

    // A third of the way through on w1 alone, a second node joins.
    await rx.waitFor(() => answered() >= N / 3, 60_000);
    await workflowsNode("w2");
    let openGate = (): void => undefined;
    gate = new Promise<void>((ok) => (openGate = ok));
    // The map's ten unfinished children each hold a request open: none is between its answer and its write.
    await rx.waitFor(() => open("/map").length === 10, 20_000);
    const victim = senderOf(open("/map"));
    const ports = connectionsOf(victim.child.pid as number, rx.port);
    const lost = open("/map").filter((r) => ports.has(r.fromPort));
    expect(lost.length).toBeGreaterThan(0);
    await kill(victim);
    // The victim's requests end cut, never answered; then the gate opens for the survivor's (if any).
    await rx.waitFor(() => lost.every((r) => r.endedAt !== undefined), 5_000);
    gate = null;
    openGate();
    expect(lost.every((r) => r.answered === false)).toBe(true);

    // The dead node's children are claimed again by the survivor once their claims run out (the
    // step's timeout_ms plus the claim's margin) and their requests sent again; then the node restarts.
    const lostItems = new Set(lost.map((r) => r.json.i as number));
    const answeredItem = (i: number) => rx.byPath("/map").some((r) => r.json.i === i && r.answered);
    await rx.waitFor(() => [...lostItems].every(answeredItem), 30_000);
    await workflowsNode(`${victim.name}b`);

    const done = await ended(wf.id, run, 90_000);
    expect(done.status).toBe("succeeded");
    expect(done.steps[0].output).toMatchObject({ count: N, succeeded: N, failed: 0, results: items, results_truncated: false });

    const requests = rx.byPath("/map");
    expect(mostAtOnce(requests)).toBe(10);
    expect(requests.every((r) => r.standardSignatureOk)).toBe(true);
    // Each item's child once, succeeded; each item's request answered exactly once.
    const children = await childrenOf(run);
    expect(children.map((c) => c.parent.index).sort((a, b) => a - b)).toEqual(items);
    expect(children.every((c) => c.status === "succeeded")).toBe(true);
    const childOf = new Map(children.map((c) => [c.parent.index as number, c.id as string]));
    const byItem = new Map<number, Received[]>();
    for (const r of requests) byItem.set(r.json.i, [...(byItem.get(r.json.i) ?? []), r]);
    expect([...byItem.keys()].sort((a, b) => a - b)).toEqual(items);
    for (const [i, sent] of byItem) {
      expect(sent.filter((r) => r.answered)).toHaveLength(1);
      // An http step is sent at least once: a request cut by its node's death is sent again by the
      // child's next claim, with the same Idempotency-Key (`<child run>:<step>`) and webhook-id.
      expect(new Set(sent.map((r) => r.headers["idempotency-key"]))).toEqual(new Set([`${childOf.get(i)}:call`]));
      expect(new Set(sent.map((r) => r.headers["webhook-id"]))).toEqual(new Set([`${childOf.get(i)}:call`]));
      if (sent.length > 1) expect(lostItems.has(i)).toBe(true);
    }
    // Only the requests the kill cut were sent twice, each once more.
    expect(requests.length).toBe(N + lost.length);
  });
});

describe("parallel over two workflows nodes", () => {
  it("a branch's failure stored as its node is killed, before it reached the parent: the other node cancels the other branch and fails the step, nothing sent twice", async () => {
    let openFail = (): void => undefined;
    const failGate = new Promise<void>((ok) => (openFail = ok));
    rx.behave("/fail", () => ({ gate: failGate, status: 500, standardOnly: true }));
    rx.behave("/slow", () => ({ hang: true }));
    // The failing branch's claim runs out well before the slow one's (timeout_ms plus the claim's margin each).
    const wf = await create([
      {
        id: "both",
        type: "parallel",
        branches: {
          slow: [{ id: "wait", type: "http", method: "POST", url: rx.url("/slow"), timeout_ms: 20_000 }],
          bad: [{ id: "charge", type: "http", method: "POST", url: rx.url("/fail"), timeout_ms: 3_000 }],
        },
      },
    ]);
    rx.setSecret("/fail", wf.signing_secret);
    const started = await api(gw, "POST", `/workflows/${wf.id}/runs`, { key: admin, body: { input: {} } });
    expect(started.status).toBe(201);
    const run = started.body.data.id as string;
    await rx.waitFor(() => rx.byPath("/fail").length === 1 && rx.byPath("/slow").length === 1, 20_000);
    const holder = senderOf(rx.byPath("/fail"));
    const branch = async (index: number) => (await childrenOf(run)).find((c) => c.parent.index === index);

    // The events service frozen, the failing branch's node stores the child's end and then waits to
    // hand over its workflow.completed, which is what carries the end to the parent: killed there.
    events.child.kill("SIGSTOP");
    try {
      openFail();
      await waitFor("the failing branch's child to have failed", async () => (await branch(1))?.status === "failed");
      expect(await runOf(wf.id, run)).toMatchObject({ status: "waiting", steps: [{ id: "both", status: "waiting" }] });
      expect((await branch(0))?.status).toBe("running");
      await kill(holder);
    } finally {
      events.child.kill("SIGCONT");
    }

    const done = await ended(wf.id, run, 60_000);
    expect(done.status).toBe("failed");
    expect(done.steps[0]).toMatchObject({
      status: "failed",
      error_code: "child_failed",
      error: "the branch 'bad' failed",
      output: { slow: { status: "cancelled" }, bad: { status: "failed" } },
    });
    expect(await branch(0)).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended" });
    expect(await branch(1)).toMatchObject({ status: "failed" });
    // Each branch's end is published once the survivor hands it over; by then nothing more is sent.
    const kids = [(await branch(0)).id, (await branch(1)).id, run];
    await waitFor("the three runs' ends to be published", async () => {
      const page = await get("/events?type=workflow.completed&limit=20");
      const ended = new Set((page?.data ?? []).map((e: any) => e.data.run_id));
      return kids.every((id) => ended.has(id));
    });
    expect(rx.byPath("/fail")).toHaveLength(1);
    expect(rx.byPath("/slow")).toHaveLength(1);
  });
});
