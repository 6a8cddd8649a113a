import { startCli, type Proc } from "../../tools/procs";
import { freePort, runCli, startNode, tempDir, waitFor, waitForGateway, type NodeProc } from "../helpers/cluster";
import { api } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * `events tail`, `deliveries tail` and `listen` as processes against a server process: many
 * pending deliveries, webhooks created while they run, a 429, and the server restarting under them.
 */
jest.setTimeout(180_000);

const jsonLines = (p: Proc): any[] =>
  p
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));

let dir: { path: string; remove(): void };
let server: NodeProc;
let rx: Receiver;
let gw: string;
let port: number;
let env: Record<string, string>;
let key: string;
/** Keys that emit the test's events, so its own requests stay inside each key's 100 a second. */
let emitters: string[];
const running: Proc[] = [];
const cli = (args: string[]) => {
  const p = startCli(args, env);
  running.push(p);
  return p;
};
const startServer = (name: string) => startNode(name, { DATA_DIR: dir.path, PORT: String(port), WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
const emit = async (type: string, n: number): Promise<string[]> => {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await api(gw, "POST", "/events", { key: emitters[i % emitters.length], body: { type, data: { i } } });
    expect(res.status).toBe(201);
    ids.push(res.body.data.id);
  }
  return ids;
};
const createHook = async (path: string, events: string[]) => {
  const res = await api(gw, "POST", "/webhooks", { key, body: { url: rx.url(path), events } });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; secret: string };
};

beforeAll(async () => {
  dir = tempDir();
  rx = await startReceiver();
  port = await freePort();
  server = startServer("cli-tail");
  gw = `http://127.0.0.1:${port}/v1`;
  await waitFor("the server", async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => null))?.status === 200, 30_000);
  key = runCli(["orgs", "create", "--name", "Tail Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "test")!.key;
  await waitForGateway(gw, key);
  env = { API_URL: gw, API_KEY: key, DATA_DIR: dir.path };
  emitters = [];
  for (let i = 0; i < 3; i++)
    emitters.push((await api(gw, "POST", "/api-keys", { key, body: { name: `emitter ${i}`, scopes: ["events:write"] } })).body.data.key);
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.kill("SIGKILL")));
  await server?.kill();
  await rx?.close();
  dir?.remove();
});

describe("deliveries tail", () => {
  it("with 130 deliveries pending it stays inside the rate limit, follows a webhook created after it started, and prints a retry of an older delivery", async () => {
    rx.behave("/down", () => ({ status: 500 }));
    rx.behave("/later", () => ({ status: 200 }));
    const down = await createHook("/down", ["load.before", "load.during"]);
    const [older] = await emit("load.before", 1);
    await waitFor("the older delivery's first attempt", () => rx.byPath("/down").length === 1);
    const olderDelivery = (await api(gw, "GET", `/webhooks/${down.id}/deliveries`, { key })).body.data[0];
    expect(olderDelivery).toMatchObject({ event_id: older, status: "pending" });

    const tail = cli(["deliveries", "tail", "--json"]);
    await waitFor("the tail to start", () => tail.output().includes("following 1 delivery log"));
    // Each failed once; the next try is 90 s away: 130 deliveries stay pending.
    await emit("load.during", 130);
    await waitFor(
      "130 first attempts in the tail",
      () => jsonLines(tail).filter((l) => l.event_type === "load.during").length === 130,
      60_000,
    );

    const later = await createHook("/later", ["late.one"]);
    rx.setSecret("/later", later.secret);
    const [late] = await emit("late.one", 1);
    await waitFor("the new webhook's attempt in the tail", () => jsonLines(tail).some((l) => l.event_id === late), 30_000);
    expect(jsonLines(tail).find((l) => l.event_id === late)).toMatchObject({ webhook_id: later.id, status_code: 200, number: 1 });

    const retried = await api(gw, "POST", `/webhooks/${down.id}/deliveries/${olderDelivery.id}/retry`, { key });
    expect(retried.status).toBe(200);
    await waitFor("the older delivery's retry in the tail", () => jsonLines(tail).some((l) => l.delivery_id === olderDelivery.id), 30_000);

    const lines = jsonLines(tail);
    // Its first attempt came before the tail started: only the retry is news.
    expect(lines.filter((l) => l.delivery_id === olderDelivery.id).map((l) => l.number)).toEqual([2]);
    const keys = lines.map((l) => `${l.delivery_id}#${l.number}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(tail.child.exitCode).toBeNull();
    expect(tail.output()).not.toContain("rate_limited");
    await tail.kill();
  });

  it("waits out a 429 as Retry-After says and goes on without losing or repeating a line", async () => {
    rx.behave("/busy", () => ({ status: 200 }));
    const hook = await createHook("/busy", ["busy.one", "busy.two"]);
    const tail = cli(["deliveries", "tail", "--webhook", hook.id, "--json"]);
    await waitFor("the tail to start", () => tail.output().includes("following 1 delivery log"));
    const sent = await emit("busy.one", 3);
    // Spend the tail's key's window until one of its polls is refused.
    await waitFor(
      "the tail to be refused with 429",
      async () => {
        await Promise.all(Array.from({ length: 110 }, () => api(gw, "GET", "/me", { key })));
        return /429 rate_limited.*asking again in/.test(tail.output());
      },
      30_000,
    );
    sent.push(...(await emit("busy.two", 3)));
    await waitFor("every attempt in the tail", () => jsonLines(tail).length >= 6, 30_000);
    expect(jsonLines(tail).map((l) => l.event_id)).toEqual(sent);
    await tail.kill();
  });
});

describe("across a server restart", () => {
  it("events tail and deliveries tail resume without losing or repeating a line; listen keeps its secret", async () => {
    rx.behave("/restart", () => ({ status: 200 }));
    rx.behave("/local", () => ({ status: 200 }));
    const hook = await createHook("/restart", ["restart.happened"]);
    const events = cli(["events", "tail", "--type", "restart.happened", "--json"]);
    const deliveries = cli(["deliveries", "tail", "--webhook", hook.id, "--json"]);
    const listener = cli(["listen", "--forward-to", rx.url("/local"), "--events", "restart.*", "--json"]);
    await waitFor(
      "the tails to start",
      () => events.output().includes("following new events") && deliveries.output().includes("following 1"),
    );
    await waitFor("the listener's session", () => jsonLines(listener).some((l) => l.kind === "session"), 15_000);
    const first = jsonLines(listener).find((l) => l.kind === "session");
    // The local app knows the first secret only.
    rx.setSecret("/local", first.secret);
    rx.setSecret("/restart", hook.secret);

    const before = await emit("restart.happened", 2);
    await waitFor("the events before the restart", () => jsonLines(events).length === 2 && jsonLines(deliveries).length === 2, 20_000);
    await waitFor("the deliveries forwarded", () => rx.byPath("/local").length === 2, 20_000);

    await server.kill("SIGTERM");
    await waitFor(
      "the tails to notice",
      () => /unreachable|ECONNREFUSED|503/.test(events.output()) && /asking again/.test(deliveries.output()),
      30_000,
    );
    server = startServer("cli-tail-2");
    await waitForGateway(gw, key);
    await waitFor("the listener's new session", () => jsonLines(listener).filter((l) => l.kind === "session").length === 2, 30_000);
    const second = jsonLines(listener).filter((l) => l.kind === "session")[1];
    expect(second.id).not.toBe(first.id);
    expect(second.secret).toBe(first.secret);

    const after = await emit("restart.happened", 2);
    await waitFor("the events after the restart", () => jsonLines(events).length >= 4 && jsonLines(deliveries).length >= 4, 30_000);
    expect(jsonLines(events).map((e) => e.id)).toEqual([...before, ...after]);
    expect(jsonLines(deliveries).map((d) => d.event_id)).toEqual([...before, ...after]);
    await waitFor("the deliveries after the restart forwarded", () => rx.byPath("/local").length >= 4, 30_000);
    expect(rx.byPath("/local").map((r) => [r.json.id, r.verified])).toEqual([...before, ...after].map((id) => [id, true]));
    await Promise.all([events.kill(), deliveries.kill(), listener.kill()]);
  });
});
