import { ServiceBroker, type Context } from "moleculer";
import { MsgpackrSerializer } from "../../shared/runtime/serializer";
import { BatchingNatsTransporter } from "../../shared/runtime/transporter";
import { startNats, waitFor, type NatsServer } from "../helpers/cluster";
import { eventually } from "../../tools/eventually";

/**
 * The batching NATS transporter between two brokers over a real nats-server: packets held for the
 * end of an event-loop turn still arrive, in the order they were sent, and none is left behind
 * when a broker stops.
 */
jest.setTimeout(30_000);

let nats: NatsServer;
const brokers: ServiceBroker[] = [];

const broker = (nodeID: string) => {
  const b = new ServiceBroker({
    nodeID,
    namespace: "transporter-test",
    transporter: new BatchingNatsTransporter({ url: nats.url }),
    serializer: new MsgpackrSerializer(),
    logger: false,
  });
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

it("answers many concurrent calls, each with its own answer, and keeps events in order", async () => {
  const seen: number[] = [];
  const server = broker("server");
  server.createService({
    name: "echo",
    actions: {
      double: (ctx: Context<{ n: number }>) => ctx.params.n * 2,
      // Answers out of order: later calls may finish first.
      slow: async (ctx: Context<{ n: number }>) => {
        await new Promise((r) => setTimeout(r, (ctx.params.n * 7) % 13));
        return ctx.params.n;
      },
    },
    events: { "tick.sent": (ctx: Context<{ n: number }>) => void seen.push(ctx.params.n) },
  });
  const client = broker("client");
  await Promise.all([server.start(), client.start()]);
  await client.waitForServices(["echo"]);

  const ns = Array.from({ length: 500 }, (_, i) => i);
  expect(await Promise.all(ns.map((n) => client.call("echo.double", { n })))).toEqual(ns.map((n) => n * 2));
  expect(await Promise.all(ns.map((n) => client.call("echo.slow", { n })))).toEqual(ns);

  for (const n of ns) client.emit("tick.sent", { n });
  await eventually("every tick received", () => seen.length >= ns.length, 5000, 10).catch(() => undefined);
  expect(seen).toEqual(ns);
});

it("carries JSON keys as they are, __proto__ included, both ways", async () => {
  // msgpackr on its own decodes a `__proto__` key as `__proto_`; the serializer escapes such keys.
  const data = JSON.parse('{"__proto__":{"__proto__":1,"__proto_":2},"constructor":3,"a.b":4,"$x":5,"":6,"\\u0000":7}');
  const server = broker("keys-server");
  server.createService({
    name: "keys",
    actions: { echo: (ctx: Context<{ data: unknown }>) => ({ got: JSON.stringify(ctx.params.data), data: ctx.params.data }) },
  });
  const client = broker("keys-client");
  await Promise.all([server.start(), client.start()]);
  await client.waitForServices(["keys"]);
  const answer = await client.call<{ got: string; data: unknown }, { data: unknown }>("keys.echo", { data });
  expect(answer.got).toBe(JSON.stringify(data));
  expect(JSON.stringify(answer.data)).toBe(JSON.stringify(data));
});

it("sends what it still holds before a stopping broker closes its connection", async () => {
  const got: string[] = [];
  const listener = broker("listener");
  listener.createService({ name: "sink", events: { "last.words": (ctx: Context<{ text: string }>) => void got.push(ctx.params.text) } });
  const leaver = broker("leaver");
  await Promise.all([listener.start(), leaver.start()]);
  await leaver.waitForServices(["sink"]);
  await listener.waitForServices(["$node"]);

  // Emitted and stopped in the same turn: the event is still only held by the transporter.
  void leaver.emit("last.words", { text: "goodbye" });
  await leaver.stop();
  await eventually("the last words", () => got.length > 0, 5000, 10).catch(() => undefined);
  expect(got).toEqual(["goodbye"]);
  // The stop's DISCONNECT packet went out too: the listener dropped the node at once, without waiting for missed heartbeats.
  await eventually("the leaver dropped", () => !listener.registry.nodes.get("leaver")?.available, 2000, 10).catch(() => undefined);
  expect(listener.registry.nodes.get("leaver")?.available).toBe(false);
});

it("logs a packet its closed connection cannot take instead of ending the process", async () => {
  const warnings: string[] = [];
  // Only the transporter's warnings are looked at (recorded below); the broker's own are not printed.
  const b = new ServiceBroker({
    nodeID: "closed",
    namespace: "transporter-test-closed",
    transporter: new BatchingNatsTransporter({ url: nats.url, maxReconnectAttempts: 0 }),
    serializer: new MsgpackrSerializer(),
    logger: { type: "Console", options: { level: "fatal" } },
  });
  brokers.push(b);
  await b.start();
  const transit = b.transit as unknown as {
    discoverNodes(): Promise<void>;
    tx: { client: { close(): Promise<void> }; logger: { warn(...a: unknown[]): void } };
  };
  transit.tx.logger.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(" "));
  // A DISCOVER broadcast (it always goes out, listeners or not) is held for the end of the turn,
  // and the connection closes before then.
  void transit.discoverNodes().catch(() => undefined);
  await transit.tx.client.close();
  await waitFor(
    "the DISCOVER the closed connection refused, logged as a warning",
    () => warnings.some((w) => w.includes("NATS publish to") && w.includes("DISCOVER") && w.includes("CONNECTION_CLOSED")),
    5000,
  );
});
