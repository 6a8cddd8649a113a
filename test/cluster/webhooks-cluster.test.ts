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
import { startReceiver, type Received, type Receiver } from "../helpers/receiver";

/**
 * Webhook delivery across real processes over a real nats-server: one node with the API
 * and the webhooks service, and dispatcher nodes started and killed around it.
 */
jest.setTimeout(120_000);

let nats: NatsServer;
let dir: { path: string; remove(): void };
let rx: Receiver;
const nodes: NodeProc[] = [];
let gw: string;
/** The API node's Prometheus metrics: its registry says which dispatchers its wake-ups reach. */
let metrics: string;
let admin: string;
let common: Record<string, string>;

const dispatcher = (name: string): NodeProc => {
  const node = startNode(name, { ...common, SERVICES: "webhook-dispatcher", LOG_LEVEL: process.env.DISPATCHER_LOG_LEVEL ?? "warn" });
  nodes.push(node);
  return node;
};

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  rx = await startReceiver();
  common = {
    TRANSPORTER: nats.url,
    DATA_DIR: dir.path,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WEBHOOK_TIMEOUT_MS: "1000",
    WEBHOOK_RETRY_DELAYS_MS: "100,100,100,100",
    RATE_LIMIT_MAX: "100000",
  };
  const [port, metricsPort] = [await freePort(), await freePort()];
  nodes.push(
    startNode("api", {
      ...common,
      SERVICES: "gateway,auth,keys,orgs,events,webhooks",
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
    }),
  );
  metrics = `http://127.0.0.1:${metricsPort}/metrics`;
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Hooks Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
});

afterAll(async () => {
  saveClusterLogs("webhooks", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  await rx?.close();
  dir?.remove();
});

async function hook(path: string, events: string[]) {
  const res = await api(gw, "POST", "/webhooks", { key: admin, body: { url: rx.url(path), events } });
  expect(res.status).toBe(201);
  rx.setSecret(path, res.body.data.secret);
  return res.body.data as { id: string };
}

/** POSTs `count` events of `type`, `parallel` at a time; returns their ids. */
async function burst(type: string, count: number, parallel = 8): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) {
        const i = next++;
        const res = await api(gw, "POST", "/events", { key: admin, body: { type, data: { i } } });
        expect(res.status).toBe(201);
        ids.push(res.body.data.id);
      }
    }),
  );
  return ids;
}

describe("webhook delivery over NATS", () => {
  it("delivers events stored while no dispatcher runs once one starts", async () => {
    await hook("/offline", ["offline.test"]);
    const ids = await burst("offline.test", 20);
    // Stored, and nobody to send them: the API node runs no dispatcher.
    expect(rx.byPath("/offline")).toHaveLength(0);
    dispatcher("d1");
    await rx.waitFor(() => new Set(rx.byPath("/offline").map((r) => r.json.id)).size === 20, 30_000);
    expect(new Set(rx.byPath("/offline").map((r) => r.json.id))).toEqual(new Set(ids));
    expect(rx.byPath("/offline").every((r) => r.verified)).toBe(true);
  });

  it("loses nothing when a dispatcher is SIGKILLed mid-burst, and only its unfinished attempts repeat", async () => {
    const d2 = dispatcher("d2");
    // d2 joined, so wake-ups are shared between the two.
    await waitForNodes(metrics, "webhook-dispatcher", 2);
    const wh = await hook("/burst", ["burst.test"]);
    // Slow enough that both dispatchers hold attempts in flight when one dies.
    rx.behave("/burst", () => ({ status: 200, delayMs: 25 }));
    const total = 400;
    const emitting = burst("burst.test", total);
    // Kill d2 once both nodes are sending: d2's connections to the receiver are found from its
    // socket descriptors, so what each node sent is known exactly.
    const pid = d2.child.pid!;
    let d2Ports = new Set<number>();
    await rx.waitFor(() => {
      if (rx.byPath("/burst").length < 80) return false;
      d2Ports = connectionsOf(pid, rx.port);
      return rx.byPath("/burst").some((r) => d2Ports.has(r.fromPort));
    }, 30_000);
    d2Ports = connectionsOf(pid, rx.port);
    const killStart = Date.now();
    await d2.kill("SIGKILL");
    const killEnd = Date.now();
    const ids = await emitting;

    await rx.waitFor(() => new Set(rx.byPath("/burst").map((r) => r.json.id)).size === total, 60_000);
    // The log agrees: every delivery succeeded, the killed node's unfinished ones after their claim
    // ran out and a live node sent them again.
    await waitFor(
      "every delivery to be logged as succeeded",
      async () => {
        const res = await api(gw, "GET", `/webhooks/${wh.id}/deliveries?status=succeeded&per_page=1`, { key: admin });
        return res.body.meta.total === total;
      },
      30_000,
    );

    const got = rx.byPath("/burst");
    expect(new Set(got.map((r) => r.json.id))).toEqual(new Set(ids));
    expect(got.every((r) => r.verified)).toBe(true);
    // d2's connections are the ones that closed when it died (live nodes keep theirs open); the
    // ones it was seen holding before the kill are among them.
    const closedWithD2 = (c: number) => (rx.closedAt(c) ?? 0) >= killStart && (rx.closedAt(c) ?? 0) <= killEnd + 1000;
    const byD2 = new Set(got.filter((r) => closedWithD2(r.connection)).map((r) => r.connection));
    for (const r of got.filter((x) => x.at < killStart && d2Ports.has(x.fromPort))) expect(byD2.has(r.connection)).toBe(true);
    const sentByD2 = (r: Received) => byD2.has(r.connection);
    const byKilled = got.filter(sentByD2).length;
    expect(byKilled).toBeGreaterThan(0);
    // Every repeat is an attempt the killed node had sent but could not record; live nodes never
    // sent the same delivery twice.
    const first = new Map<string, Received>();
    const repeats: Received[] = [];
    for (const r of got) {
      const id = r.headers["service-delivery"];
      if (first.has(id)) repeats.push(r);
      else first.set(id, r);
    }
    for (const r of repeats) {
      expect(sentByD2(first.get(r.headers["service-delivery"])!)).toBe(true);
      expect(sentByD2(r)).toBe(false);
    }
    console.log(
      `fault test: ${total} events, ${got.length} receipts, ${byKilled} sent by the killed dispatcher, ${repeats.length} duplicates (each first sent by the killed one)`,
    );
  });

  it("keeps a throttled webhook under its rate_limit with two dispatcher nodes sending, and delivers everything", async () => {
    // d2 was killed above: d1 and a new d3 send; each takes its share of the limit.
    dispatcher("d3");
    const limit = 10;
    const res = await api(gw, "POST", "/webhooks", {
      key: admin,
      body: { url: rx.url("/throttled"), events: ["throttle.test"], rate_limit: limit },
    });
    expect(res.status).toBe(201);
    expect(res.body.data.rate_limit).toBe(limit);
    rx.setSecret("/throttled", res.body.data.secret);
    const ids = await burst("throttle.test", 50);
    await rx.waitFor(() => new Set(rx.byPath("/throttled").map((r) => r.json.id)).size === ids.length, 60_000);
    const got = rx.byPath("/throttled");
    expect(new Set(got.map((r) => r.json.id))).toEqual(new Set(ids));
    expect(got.every((r) => r.verified)).toBe(true);
    const at = got.map((r) => r.at).sort((a, b) => a - b);
    // Each node spaces its own sends; two nodes' sends may fall a few ms closer than 1/limit.
    for (let i = 0; i + limit + 2 < at.length; i++) expect({ i, window: at[i + limit + 2] - at[i] >= 1000 }).toEqual({ i, window: true });
    const rate = ((at.length - 1) * 1000) / (at[at.length - 1] - at[0]);
    expect(rate).toBeLessThanOrEqual(limit * 1.05);
    // Shared, not split: the two nodes together send within 10 % of the limit (a per-node share sent 6/s here).
    expect(rate).toBeGreaterThanOrEqual(limit * 0.9);
    console.log(`throttle over two dispatchers: rate_limit ${limit}/s, measured ${rate.toFixed(2)}/s at the receiver`);
  });

  it("sends again, under the same delivery id, what a dispatcher killed between attempt and write had sent; the log holds it once", async () => {
    // The first attempt is made before the delivery's row is written (one write per delivery):
    // only the dispatcher killed here may run, so what it sent and never wrote is known.
    await Promise.all(nodes.slice(1).map((n) => n.kill("SIGKILL")));
    const d3 = dispatcher("d3");
    const wh = await hook("/crash", ["crash.test"]);
    // The first request is received and never answered: the attempt is made, its outcome never
    // written. Every later one is answered 200.
    rx.behave("/crash", (n) => (n === 1 ? { hang: true } : { status: 200 }));
    const [event] = await burst("crash.test", 1);
    await rx.waitFor(() => rx.byPath("/crash").length > 0, 30_000);
    await d3.kill("SIGKILL");
    const first = rx.byPath("/crash")[0];
    expect(first.json).toMatchObject({ id: event });
    // Killed within a second of sending (FAST_MS), so nothing of the delivery was stored.
    expect(await logOf(wh.id)).toEqual([]);

    dispatcher("d4");
    await rx.waitFor(() => rx.byPath("/crash").length >= 2, 30_000);
    const again = rx.byPath("/crash")[1];
    expect(again.json).toMatchObject({ id: event });
    expect(again.verified).toBe(true);
    // The same delivery id, so a receiver that deduplicates on `webhook-id` sees one delivery.
    expect(again.headers["webhook-id"]).toBe(first.headers["webhook-id"]);
    await waitFor("the delivery to be logged as succeeded", async () => (await logOf(wh.id)).some((d) => d.status === "succeeded"), 30_000);
    const log = await logOf(wh.id);
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ id: first.headers["webhook-id"], event_id: event, status: "succeeded" });
    expect(log[0].attempts).toHaveLength(1);
    expect(rx.byPath("/crash")).toHaveLength(2);
  });
});

async function logOf(webhookId: string) {
  const res = await api(gw, "GET", `/webhooks/${webhookId}/deliveries?per_page=100`, { key: admin });
  expect(res.status).toBe(200);
  return res.body.data as { id: string; event_id: string; status: string; attempts: unknown[] }[];
}
