import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadSettings } from "../../shared/config";
import { startNats, waitFor, type NatsServer } from "../helpers/cluster";
import { eventually, realTimePasses } from "../../tools/eventually";

/**
 * How long a node that dies without a goodbye (SIGKILL, a cut cable) stays in the others'
 * registries, with the cluster's own broker options: the README promises 6 s without heartbeats.
 * A dead node is imitated in process: its heartbeats stop and its NATS connection closes, so the
 * others hear nothing more from it, as after a SIGKILL.
 */
jest.setTimeout(60_000);

let nats: NatsServer;
const brokers: ServiceBroker[] = [];

const broker = (nodeID: string) => {
  const b = new ServiceBroker(
    brokerOptions(loadSettings({ TRANSPORTER: nats.url, NODE_ID: nodeID, LOG_LEVEL: "false" }), { namespace: "heartbeat-test" }),
  );
  brokers.push(b);
  return b;
};

beforeAll(async () => {
  nats = await startNats();
});

afterAll(async () => {
  for (const b of brokers) await b.stop().catch(() => undefined);
  await nats?.stop();
});

it("declares a silent node gone 6-7 s after its last heartbeat (at most 9 s after it died)", async () => {
  const watcher = broker("watcher");
  const victims = ["v1", "v2", "v3", "v4"].map(broker);
  const lastBeat = new Map<string, number>();
  const beats = new Map<string, number>();
  const gone = new Map<string, number>();
  const diedAt = new Map<string, number>();
  const discoverer = (watcher.registry as unknown as { discoverer: { heartbeatReceived(nodeID: string, payload: unknown): void } })
    .discoverer;
  const received = discoverer.heartbeatReceived.bind(discoverer);
  discoverer.heartbeatReceived = (nodeID, payload) => {
    if (!diedAt.has(nodeID)) lastBeat.set(nodeID, Date.now());
    beats.set(nodeID, (beats.get(nodeID) ?? 0) + 1);
    received(nodeID, payload);
  };
  watcher.createService({
    name: "watch",
    events: {
      "$node.disconnected"(ctx: { params: { node: { id: string }; unexpected: boolean } }) {
        if (ctx.params.unexpected) gone.set(ctx.params.node.id, Date.now());
      },
    },
  });
  await Promise.all([watcher.start(), ...victims.map((v) => v.start())]);
  // A few heartbeats each, so their phases are spread as in a running cluster.
  await waitFor("two heartbeats from each victim", () => victims.every((v) => (beats.get(v.nodeID) ?? 0) >= 2), 20_000);

  // Deaths 1.5 s apart: each meets the watcher's checks at another moment of their cycle.
  for (const v of victims) {
    diedAt.set(v.nodeID, Date.now());
    (v.registry as unknown as { discoverer: { stopHeartbeatTimers(): void } }).discoverer.stopHeartbeatTimers();
    await (v.transit as unknown as { tx: { client: { close(): Promise<void> } } }).tx.client.close();
    await realTimePasses(1_500, "the spread of deaths over the watcher's check cycle is what is tested");
  }
  await eventually("every victim found dead", () => gone.size >= victims.length, 30_000, 20).catch(() => undefined);

  const figures = victims.map((v) => ({
    node: v.nodeID,
    after_last_heartbeat_ms: (gone.get(v.nodeID) ?? NaN) - (lastBeat.get(v.nodeID) ?? NaN),
    after_death_ms: (gone.get(v.nodeID) ?? NaN) - (diedAt.get(v.nodeID) ?? NaN),
  }));
  process.stdout.write(`heartbeat: ${JSON.stringify(figures)}\n`);
  for (const f of figures) {
    expect(f.after_last_heartbeat_ms).toBeGreaterThanOrEqual(6_000);
    expect(f.after_last_heartbeat_ms).toBeLessThan(7_000);
    expect(f.after_death_ms).toBeLessThan(9_000);
  }
});
