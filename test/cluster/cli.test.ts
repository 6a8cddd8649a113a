import { Webhook } from "standardwebhooks";
import { spawnSync } from "node:child_process";
import { SERVER_JS, cliRun, startCli, waitForServerMark, type Proc } from "../../tools/procs";
import {
  freePort,
  runCli,
  startNats,
  startNode,
  tempDir,
  waitFor,
  waitForGateway,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";
import { api } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The CLI as people run it: a process of its own against servers started as processes, a real
 * receiver on 127.0.0.1 for `listen --forward-to`, and two gateway nodes over a real nats-server.
 */
jest.setTimeout(120_000);

const SYSTEM_NODE = "/usr/bin/node";
/** The JSON lines a CLI printed on stdout (warnings go to stderr, prefixed). */
const jsonLines = (p: Proc): any[] =>
  p
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));

const running: Proc[] = [];
const cli = (args: string[], env: Record<string, string>) => {
  const p = startCli(args, env);
  running.push(p);
  return p;
};

afterAll(async () => {
  await Promise.all(running.map((p) => p.kill("SIGKILL")));
});

describe("the command line itself", () => {
  it("prints usage on stdout and exits 0 for --help, on every command", () => {
    const commands = [[], ["orgs", "create"], ["orgs", "list"], ["keys"], ["keys", "create"], ["keys", "revoke"], ["webhooks", "test"]];
    const more = [["trigger"], ["events", "tail"], ["deliveries", "tail"], ["listen"], ["help"]];
    const added = [
      ["webhooks", "get"],
      ["webhooks", "update"],
      ["webhooks", "delete"],
      ["webhooks", "rotate"],
      ["workflows", "create"],
    ];
    const runs = [["workflows", "run"], ["runs", "list"], ["runs", "get"], ["runs", "cancel"], ["approve"], ["reject"], ["get"], ["post"]];
    for (const words of [...commands, ...more, ...added, ...runs]) {
      const res = cliRun(words[0] === "help" ? words : [...words, "--help"], {});
      expect({ words, status: res.status, usage: res.stdout.startsWith("Usage: ") }).toEqual({ words, status: 0, usage: true });
    }
    expect(cliRun(["listen", "-h"], {}).stdout).toContain("--forward-to");
  });

  it("exits 2 with a hint on an unknown command, a missing option or a stray argument", () => {
    const typo = cliRun(["kyes", "list"], {});
    expect(typo.status).toBe(2);
    expect(typo.stderr).toContain("Unknown command 'kyes list'. Did you mean 'keys list'?");
    expect(typo.stdout).toBe("");
    const missing = cliRun(["listen"], {});
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/^--forward-to is required/);
    expect(cliRun(["keys", "list", "extra"], {}).status).toBe(2);
    expect(cliRun(["trigger", "order.created", "--data", "[1]"], { API_KEY: "svc_test_x" }).stderr).toContain(
      "--data must be a JSON object",
    );
    expect(cliRun(["keys", "list"], { API_KEY: "", API_URL: "http://127.0.0.1:1/v1" }).stderr).toContain("No API key");
  });

  it("refuses to start on Node 20 with one line naming the Node to use (the CLI and the server)", () => {
    const server = spawnSync(SYSTEM_NODE, [SERVER_JS], { encoding: "utf8", timeout: 30_000 });
    for (const res of [cliRun(["--help"], {}, SYSTEM_NODE), cliRun(["orgs", "list"], {}, SYSTEM_NODE), server]) {
      expect(res.status).toBe(1);
      expect(res.stderr.trim().split("\n")).toHaveLength(1);
      expect(res.stderr).toMatch(/^This needs Node\.js 24 or newer, not 20\.\d+\.\d+: use npm start \/ npm run cli, or the project's Node/);
    }
  });
});

describe("against one server process", () => {
  let dir: { path: string; remove(): void };
  let server: NodeProc;
  let rx: Receiver;
  let gw: string;
  let env: Record<string, string>;
  let key: string;

  beforeAll(async () => {
    dir = tempDir();
    rx = await startReceiver();
    const port = await freePort();
    server = startNode("cli-solo", {
      DATA_DIR: dir.path,
      PORT: String(port),
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      WEBHOOK_RETRY_DELAYS_MS: "100,100,100,100",
    });
    gw = `http://127.0.0.1:${port}/v1`;
    // The server marks DATA_DIR once it runs: then `orgs create` does not warn.
    await waitForServerMark(dir.path, server);
    key = runCli(["orgs", "create", "--name", "Cli Co"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "test")!.key;
    await waitForGateway(gw, key);
    env = { API_URL: gw, API_KEY: key, DATA_DIR: dir.path };
  });

  afterAll(async () => {
    await server?.kill();
    await rx?.close();
    dir?.remove();
  });

  it("orgs list reads the local store, and warns when no server uses its DATA_DIR", () => {
    const here = cliRun(["orgs", "list", "--json"], { DATA_DIR: dir.path });
    expect(here.status).toBe(0);
    expect(here.stderr).toBe("");
    expect(
      here.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).name),
    ).toEqual(["Cli Co"]);
    const other = tempDir();
    try {
      const elsewhere = cliRun(["orgs", "list", "--json"], { DATA_DIR: other.path });
      expect(elsewhere.stdout).toBe("");
      expect(elsewhere.stderr).toContain(`warning: no running server uses DATA_DIR=${other.path}`);
    } finally {
      other.remove();
    }
  });

  it("listen --forward-to: an event emitted through the API arrives signed with the printed secret, and the answer is in the delivery log", async () => {
    rx.behave("/local", () => ({ status: 202 }));
    const listener = cli(["listen", "--forward-to", rx.url("/local"), "--events", "order.*,invoice.paid", "--json"], env);
    await waitFor("the listener's session", () => jsonLines(listener).some((l) => l.kind === "session"), 15_000);
    const session = jsonLines(listener).find((l) => l.kind === "session");
    expect(session).toMatchObject({ environment: "test", events: ["order.*", "invoice.paid"], forward_to: rx.url("/local") });
    expect(session.secret).toMatch(/^whsec_/);
    rx.setSecret("/local", session.secret);

    // Not subscribed, emitted first: the subscribed one arrives alone.
    expect((await api(gw, "POST", "/events", { key, body: { type: "user.signed_up", data: {} } })).status).toBe(201);
    const emitted = await api(gw, "POST", "/events", { key, body: { type: "order.created", data: { total: 42 } } });
    expect(emitted.status).toBe(201);
    await rx.waitFor(() => rx.byPath("/local").length >= 1, 10_000);
    const [got] = rx.byPath("/local");
    expect(got.json).toEqual({
      id: emitted.body.data.id,
      type: "order.created",
      created_at: emitted.body.data.created_at,
      data: { total: 42 },
    });
    expect(got.standardSignatureOk).toBe(true);
    expect(() => new Webhook(session.secret).verify(got.body, got.headers)).not.toThrow();
    expect(() => new Webhook("whsec_" + Buffer.from("another secret!!").toString("base64")).verify(got.body, got.headers)).toThrow();

    await waitFor("the attempt in the delivery log", async () => {
      const log = await api(gw, "GET", `/listen/${session.id}/deliveries`, { key });
      return log.status === 200 && log.body.data.length === 1;
    });
    const log = await api(gw, "GET", `/listen/${session.id}/deliveries`, { key });
    expect(log.body.data[0]).toMatchObject({
      id: got.headers["webhook-id"],
      webhook_id: session.id,
      event_id: emitted.body.data.id,
      event_type: "order.created",
      status: "succeeded",
      attempts: [{ number: 1, status_code: 202, error: null, response_excerpt: "ok" }],
    });
    expect(jsonLines(listener).filter((l) => l.kind === "attempt")).toEqual([
      expect.objectContaining({ delivery_id: got.headers["webhook-id"], status_code: 202 }),
    ]);

    // Another organization's key sees nothing of this session's log: the session is not its own.
    const other = runCli(["orgs", "create", "--name", "Other Co"], { DATA_DIR: dir.path }).api_keys.find(
      (k) => k.environment === "test",
    )!.key;
    const foreign = await api(gw, "GET", `/listen/${session.id}/deliveries`, { key: other });
    expect({ status: foreign.status, code: foreign.body.error?.code }).toEqual({ status: 404, code: "resource_not_found" });
    const forged = await api(gw, "POST", `/listen/${session.id}/attempts`, {
      key: other,
      body: { delivery_id: "del_01jdx3aaaaaaaaaaaaaaaaaaaa", event_id: emitted.body.data.id, status_code: 200, duration_ms: 1 },
    });
    expect({ status: forged.status, code: forged.body.error?.code }).toEqual({ status: 404, code: "resource_not_found" });
    await listener.kill();
  });

  it("listen refuses a bad key and a bad --events with the API's error, exit 1", () => {
    const badKey = cliRun(["listen", "--forward-to", rx.url("/x")], { ...env, API_KEY: "svc_test_nope" });
    expect(badKey.status).toBe(1);
    expect(badKey.stderr).toContain("401 invalid_api_key");
    const badEvents = cliRun(["listen", "--forward-to", rx.url("/x"), "--events", "Not A Type"], env);
    expect(badEvents.status).toBe(1);
    expect(badEvents.stderr).toContain("400 parameter_invalid");
  });

  it("trigger emits a client type, runs a fixture for api_key.*, and refuses other system types", async () => {
    const res = cliRun(["trigger", "order.paid", "--data", '{"amount": 7}', "--json"], env);
    expect(res.status).toBe(0);
    const { event } = JSON.parse(res.stdout);
    const stored = await api(gw, "GET", `/events/${event.id}`, { key });
    expect(stored.body.data).toMatchObject({ type: "order.paid", data: { amount: 7 }, source: "api" });

    const fixture = cliRun(["trigger", "api_key.revoked", "--json"], env);
    expect(fixture.status).toBe(0);
    const ran = JSON.parse(fixture.stdout);
    expect(ran).toMatchObject({ fixture: true, type: "api_key.revoked" });
    const revoked = await api(gw, "GET", `/events?type=api_key.revoked`, { key });
    expect(revoked.body.data.map((e: any) => e.data.key_id)).toContain(ran.key_id);
    expect((await api(gw, "GET", `/api-keys/${ran.key_id}`, { key })).body.data).toMatchObject({
      name: "cli trigger fixture",
      status: "revoked",
    });

    const refused = cliRun(["trigger", "webhook.disabled"], env);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain("'webhook.disabled' is a system type with no fixture");
  });

  it("events tail prints the events stored after it started, and nothing from before", async () => {
    const before = await api(gw, "POST", "/events", { key, body: { type: "tail.before", data: {} } });
    const tail = cli(["events", "tail", "--json"], env);
    await waitFor("the tail to start", () => tail.output().includes("following new events"));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await api(gw, "POST", "/events", { key, body: { type: "tail.after", data: { i } } })).body.data.id);
    await waitFor("the three events", () => jsonLines(tail).length >= 3);
    expect(jsonLines(tail).map((e) => e.id)).toEqual(ids);
    expect(tail.output()).not.toContain(before.body.data.id);
    await tail.kill();
  });

  it("webhooks create, list and test, and deliveries tail showing the attempt", async () => {
    rx.behave("/hook-cli", () => ({ status: 200 }));
    const created = cliRun(["webhooks", "create", "--url", rx.url("/hook-cli"), "--events", "ping.sent", "--json"], env);
    expect(created.status).toBe(0);
    const hook = JSON.parse(created.stdout);
    rx.setSecret("/hook-cli", hook.secret);
    const listed = cliRun(["webhooks", "list", "--json"], env);
    expect(
      listed.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).id),
    ).toContain(hook.id);

    const tail = cli(["deliveries", "tail", "--webhook", hook.id, "--json"], env);
    await waitFor("the tail to start", () => tail.output().includes("following 1 delivery log"));
    // Not spawnSync: the receiver answers from this process's event loop.
    const tester = cli(["webhooks", "test", hook.id, "--json"], env);
    const status = await new Promise((done) => tester.child.once("exit", done));
    expect({ status, output: tester.output() }).toEqual({ status: 0, output: expect.stringMatching(/^\{.*\}\n$/) });
    const [delivery] = jsonLines(tester);
    expect(delivery).toMatchObject({ webhook_id: hook.id, event_type: "ping.sent", status: "succeeded" });
    expect(rx.byPath("/hook-cli").map((r) => r.verified)).toEqual([true]);
    await waitFor("the attempt in the tail", () => jsonLines(tail).some((l) => l.delivery_id === delivery.id));
    expect(jsonLines(tail)).toEqual([expect.objectContaining({ delivery_id: delivery.id, number: 1, status_code: 200 })]);
    await tail.kill();
  });

  it("deliveries tail follows every webhook and a delivery's retries; webhooks test exits 1 when the first attempt fails", async () => {
    rx.behave("/flaky", (n) => ({ status: n === 1 ? 500 : 200 }));
    const hook = JSON.parse(cliRun(["webhooks", "create", "--url", rx.url("/flaky"), "--events", "flaky.happened", "--json"], env).stdout);
    rx.setSecret("/flaky", hook.secret);
    const tail = cli(["deliveries", "tail", "--json"], env);
    await waitFor("the tail to start", () => /following \d+ delivery log/.test(tail.output()));
    const tester = cli(["webhooks", "test", hook.id, "--json"], env);
    expect(await new Promise((done) => tester.child.once("exit", done))).toBe(1);
    const [tested] = jsonLines(tester);
    expect({ webhook_id: tested.webhook_id, first: tested.attempts[0].status_code }).toEqual({ webhook_id: hook.id, first: 500 });
    await waitFor("both attempts in the tail", () => jsonLines(tail).filter((l) => l.webhook_id === hook.id).length >= 2);
    const attempts = jsonLines(tail).filter((l) => l.webhook_id === hook.id);
    expect(attempts.map((a) => [a.number, a.status_code])).toEqual([
      [1, 500],
      [2, 200],
    ]);
    await tail.kill();
  });

  it("keys create, list and revoke", async () => {
    const created = cliRun(["keys", "create", "--name", "ci", "--scopes", "events:read,events:write", "--json"], env);
    expect(created.status).toBe(0);
    const made = JSON.parse(created.stdout);
    expect(made.key).toMatch(/^svc_test_/);
    expect((await api(gw, "GET", "/events", { key: made.key })).status).toBe(200);
    const listed = cliRun(["keys", "list", "--json"], env);
    expect(
      listed.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).id),
    ).toContain(made.id);
    const revoked = cliRun(["keys", "revoke", made.id, "--json"], env);
    expect(revoked.status).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: made.id, status: "revoked" });
    expect((await api(gw, "GET", "/events", { key: made.key })).status).toBe(401);
    const unknown = cliRun(["keys", "revoke", "key_nope"], env);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain("404 resource_not_found");
  });
});

describe("through two gateway nodes over NATS", () => {
  let nats: NatsServer;
  let dir: { path: string; remove(): void };
  let rx: Receiver;
  const nodes: NodeProc[] = [];

  beforeAll(async () => {
    nats = await startNats();
    dir = tempDir();
    rx = await startReceiver();
  });

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
    await nats?.stop();
    await rx?.close();
    dir?.remove();
  });

  it("the event stored behind one gateway reaches the listener on the other, and its answer reaches the log", async () => {
    const common = { TRANSPORTER: nats.url, DATA_DIR: dir.path, RATE_LIMIT_MAX: "100000" };
    const [portA, portB] = [await freePort(), await freePort()];
    nodes.push(
      startNode("cli-a", { ...common, PORT: String(portA), SERVICES: "gateway,auth,keys,orgs,events,webhooks,webhook-dispatcher" }),
    );
    nodes.push(startNode("cli-b", { ...common, PORT: String(portB), SERVICES: "gateway" }));
    const [gwA, gwB] = [`http://127.0.0.1:${portA}/v1`, `http://127.0.0.1:${portB}/v1`];
    const key = runCli(["orgs", "create", "--name", "Two Gw"], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    await waitForGateway(gwA, key);
    await waitForGateway(gwB, key);

    rx.behave("/two", () => ({ status: 200 }));
    const listener = cli(["listen", "--forward-to", rx.url("/two"), "--json"], { API_URL: gwB, API_KEY: key });
    await waitFor("the listener's session", () => jsonLines(listener).some((l) => l.kind === "session"), 15_000);
    const session = jsonLines(listener).find((l) => l.kind === "session");
    rx.setSecret("/two", session.secret);

    // The events node (on A) learns of the listener from B's announcement: until then an event is not sent.
    const sent: string[] = [];
    await waitFor(
      "an event emitted through gateway A at the listener of gateway B",
      async () => {
        sent.push((await api(gwA, "POST", "/events", { key, body: { type: "cross.node", data: { n: sent.length } } })).body.data.id);
        return rx.byPath("/two").length > 0;
      },
      15_000,
    );
    const [got] = rx.byPath("/two");
    expect(sent).toContain(got.json.id);
    expect(got.verified).toBe(true);
    await waitFor("the attempt in the log, read through gateway A", async () => {
      const log = await api(gwA, "GET", `/listen/${session.id}/deliveries`, { key });
      return log.body.data?.some((d: any) => d.event_id === got.json.id && d.attempts[0].status_code === 200);
    });

    // Gateway B stops: the stream ends with a word why, and the CLI opens a new session once B is back.
    await nodes[1].kill("SIGTERM");
    await waitFor("the closing notice", () =>
      listener.output().includes("warning: the gateway closed the stream: the gateway is stopping"),
    );
    nodes.push(startNode("cli-b2", { ...common, PORT: String(portB), SERVICES: "gateway" }));
    await waitFor("a second session", () => jsonLines(listener).filter((l) => l.kind === "session").length === 2, 30_000);
    const second = jsonLines(listener).filter((l) => l.kind === "session")[1];
    expect(second.id).not.toBe(session.id);
    rx.setSecret("/two", second.secret);
    const before = rx.byPath("/two").length;
    await waitFor(
      "an event at the new session",
      async () => {
        await api(gwA, "POST", "/events", { key, body: { type: "cross.again", data: {} } });
        return rx.byPath("/two").length > before;
      },
      15_000,
    );
    expect(
      rx
        .byPath("/two")
        .slice(before)
        .every((r) => r.verified && r.json.type === "cross.again"),
    ).toBe(true);
    await listener.kill();
  });
});
