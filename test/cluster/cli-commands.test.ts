import { spawn } from "node:child_process";
import { CLI_JS, cliRun } from "../../tools/procs";
import { waitFor, type NodeProc, startCliServer } from "../helpers/cluster";
import { api } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The CLI as a process against a server process: what it prints of tenants' text, and the
 * commands on webhooks, workflows and runs.
 */
jest.setTimeout(120_000);

/** Every character a terminal acts on: C0, DEL, C1, line/paragraph separators, bidi controls. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;
/** Erase the line, move up, write the clipboard (OSC 52), a forged row, a bidi override and isolate. */
const HOSTILE = "Acme\u001b[2K\u001b[1A\r\u001b]52;c;ZWNobyBwd25lZA==\u0007org_forged  Forged Inc\u009b31m\u202eevil\u2066x\u2069\u2028end";

const jsonLines = (stdout: string): any[] =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

let dir: { path: string; remove(): void };
let server: NodeProc;
let rx: Receiver;
let gw: string;
let env: Record<string, string>;
let key: string;

beforeAll(async () => {
  rx = await startReceiver();
  ({ dir, server, gw, key, env } = await startCliServer("cli-commands", HOSTILE, { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" }));
});

afterAll(async () => {
  await server?.kill();
  await rx?.close();
  dir?.remove();
});

describe("tenants' text on the operator's terminal", () => {
  /** The human output holds no raw control character, shows them escaped, and the --json output the exact value. */
  const expectEscaped = (human: string) => {
    expect(CONTROL.test(human)).toBe(false);
    expect(human).toContain(
      "Acme\\x1B[2K\\x1B[1A\\x0D\\x1B]52;c;ZWNobyBwd25lZA==\\x07org_forged  Forged Inc\\x9B31m\\u202Eevil\\u2066x\\u2069\\u2028end",
    );
  };

  it("orgs list: a name with escape sequences, OSC 52 and bidi overrides is shown escaped on its one row", () => {
    const human = cliRun(["orgs", "list"], { DATA_DIR: dir.path });
    expect(human.status).toBe(0);
    expectEscaped(human.stdout);
    expect(human.stdout.trim().split("\n")).toHaveLength(2);
    const json = cliRun(["orgs", "list", "--json"], { DATA_DIR: dir.path });
    expect(CONTROL.test(json.stdout.replace(/\n/g, ""))).toBe(false);
    expect(jsonLines(json.stdout).map((o) => o.name)).toEqual([HOSTILE]);
  });

  it("keys create and keys list: a key's name", () => {
    const created = cliRun(["keys", "create", "--name", HOSTILE, "--scopes", "events:read"], env);
    expect(created.status).toBe(0);
    expectEscaped(created.stdout);
    const human = cliRun(["keys", "list"], env);
    expectEscaped(human.stdout);
    const keys = jsonLines(cliRun(["keys", "list", "--json"], env).stdout);
    expect(keys.map((k) => k.name)).toContain(HOSTILE);
    // A header, then one line per key: no row erased or forged.
    expect(human.stdout.trim().split("\n")).toHaveLength(1 + keys.length);
  });

  it("webhooks list, get and update: a webhook's description; errors naming tenant text too", () => {
    const created = cliRun(
      ["webhooks", "create", "--url", rx.url("/terminal"), "--events", "a.b", "--description", HOSTILE, "--json"],
      env,
    );
    const hook = JSON.parse(created.stdout);
    expect(hook.description).toBe(HOSTILE);
    for (const args of [
      ["webhooks", "list"],
      ["webhooks", "get", hook.id],
      ["webhooks", "update", hook.id, "--events", "a.b,c.d"],
    ]) {
      const human = cliRun(args, env);
      expect({ args, status: human.status }).toEqual({ args, status: 0 });
      expectEscaped(human.stdout);
      expect(JSON.parse(cliRun([...args, "--json"], env).stdout.split("\n")[0]).description).toBe(HOSTILE);
    }
    const refused = cliRun(["get", `/webhooks/${encodeURIComponent(`wh_${HOSTILE}`)}`], env);
    expect(refused.status).toBe(1);
    expect(CONTROL.test(refused.stderr)).toBe(false);
  });
});

describe("webhooks commands", () => {
  it("webhooks test sends a test delivery with a webhooks:write key: no event stored, no workflow started", async () => {
    rx.behave("/only-test", () => ({ status: 204 }));
    const hook = JSON.parse(
      cliRun(["webhooks", "create", "--url", rx.url("/only-test"), "--events", "shop.ordered", "--json"], env).stdout,
    );
    rx.setSecret("/only-test", hook.secret);
    const wf = await api(gw, "POST", "/workflows", {
      key,
      body: { name: "on order", trigger: { type: "event", event_type: "shop.ordered" }, steps: [{ type: "delay", duration_ms: 1 }] },
    });
    expect(wf.status).toBe(201);
    const writer = (
      await api(gw, "POST", "/api-keys", { key, body: { name: "hooks writer", scopes: ["webhooks:write", "webhooks:read"] } })
    ).body.data.key;
    const only = (await api(gw, "POST", "/api-keys", { key, body: { name: "hooks only", scopes: ["webhooks:write"] } })).body.data.key;

    // Not spawnSync: the receiver answers from this process's event loop.
    const tested = await cliAsync(["webhooks", "test", hook.id, "--json"], { ...env, API_KEY: writer });
    expect(tested.status).toBe(0);
    expect(JSON.parse(tested.stdout)).toMatchObject({ webhook_id: hook.id, event_type: "shop.ordered", test: true, status: "succeeded" });
    const sentOnly = await cliAsync(["webhooks", "test", hook.id], { ...env, API_KEY: only });
    expect({ status: sentOnly.status, stderr: sentOnly.stderr }).toEqual({ status: 0, stderr: expect.stringContaining("webhooks:read") });
    await waitFor("both test deliveries at the receiver", () => rx.byPath("/only-test").length === 2);
    expect(rx.byPath("/only-test").map((r) => r.verified)).toEqual([true, true]);

    const events = await api(gw, "GET", "/events?type=shop.ordered", { key });
    expect(events.body.data).toEqual([]);
    const runs = await api(gw, "GET", `/workflows/${wf.body.data.id}/runs`, { key });
    expect(runs.body.data).toEqual([]);
  });

  it("webhooks test --data sends that JSON object as the data; other text is refused before any request", async () => {
    rx.behave("/test-data", () => ({ status: 204 }));
    const hook = JSON.parse(cliRun(["webhooks", "create", "--url", rx.url("/test-data"), "--events", "shop.paid", "--json"], env).stdout);
    rx.setSecret("/test-data", hook.secret);
    const data = { order: "o_1", lines: [{ sku: "A", qty: 2 }], note: "ünï", gift: null };
    const tested = await cliAsync(["webhooks", "test", hook.id, "--data", JSON.stringify(data), "--json"], env);
    expect(tested.status).toBe(0);
    expect(JSON.parse(tested.stdout)).toMatchObject({ webhook_id: hook.id, event_type: "shop.paid", test: true, status: "succeeded" });
    await waitFor("the test delivery at the receiver", () => rx.byPath("/test-data").length === 1);
    const [got] = rx.byPath("/test-data");
    expect(got!.verified).toBe(true);
    expect(got!.json).toMatchObject({ type: "shop.paid", test: true, data });

    for (const [text, why] of [
      ["{oops", "--data must be JSON"],
      ["[1, 2]", "--data must be a JSON object"],
      ["null", "--data must be a JSON object"],
    ]) {
      expect(await cliAsync(["webhooks", "test", hook.id, "--data", text!], env)).toMatchObject({
        status: 2,
        stderr: expect.stringContaining(why!),
      });
    }
    // The API's own limit on an event's data: 64 KiB as JSON.
    const big = await cliAsync(["webhooks", "test", hook.id, "--data", JSON.stringify({ s: "x".repeat(64 * 1024) })], env);
    expect(big).toMatchObject({ status: 1, stderr: expect.stringMatching(/data is \d+ bytes as JSON; the limit is 65536/) });
    const deliveries = await api(gw, "GET", `/webhooks/${hook.id}/deliveries`, { key });
    expect(deliveries.body.data).toHaveLength(1);
    expect(rx.byPath("/test-data")).toHaveLength(1);
    expect((await api(gw, "GET", "/events?type=shop.paid", { key })).body.data).toEqual([]);
  });

  it("webhooks rotate prints the new secret once; delete removes it", () => {
    const hook = JSON.parse(cliRun(["webhooks", "create", "--url", rx.url("/gone"), "--events", "x.y", "--json"], env).stdout);
    const rotated = cliRun(["webhooks", "rotate", hook.id], env);
    expect(rotated.stdout).toMatch(/new signing secret: whsec_\S+ \(shown once\)/);
    expect(rotated.stdout).not.toContain(hook.secret);
    const disabled = JSON.parse(cliRun(["webhooks", "update", hook.id, "--disable", "--json"], env).stdout);
    expect(disabled.status).toBe("disabled");
    expect(cliRun(["webhooks", "update", hook.id], env)).toMatchObject({ status: 2, stderr: expect.stringContaining("nothing to change") });
    expect(cliRun(["webhooks", "delete", hook.id], env)).toMatchObject({ status: 0, stdout: `deleted ${hook.id} (${hook.url})\n` });
    expect(cliRun(["webhooks", "get", hook.id], env)).toMatchObject({ status: 1, stderr: expect.stringContaining("404") });
  });
});

describe("workflows, runs and approvals", () => {
  it("create, run, see it wait, approve it, and list it; reject and cancel others", async () => {
    const definition = {
      name: "needs a yes",
      trigger: { type: "manual" },
      steps: [{ id: "ask", type: "approval", message: "Ship it?" }],
    };
    const created = cliRun(["workflows", "create", "--definition", JSON.stringify(definition), "--json"], env);
    expect(created.status).toBe(0);
    const wf = JSON.parse(created.stdout);
    expect(cliRun(["workflows", "list"], env).stdout).toContain(wf.id);
    expect(JSON.parse(cliRun(["workflows", "get", wf.id, "--json"], env).stdout).steps[0].type).toBe("approval");

    const startRun = () => JSON.parse(cliRun(["workflows", "run", wf.id, "--input", '{"n":1}', "--json"], env).stdout);
    const waiting = async (run: { id: string }) =>
      waitFor("the run to wait", () =>
        cliRun(["runs", "get", wf.id, run.id], env).stdout.includes("waiting for approval at ask: Ship it?"),
      );

    const one = startRun();
    await waiting(one);
    const approved = cliRun(["approve", wf.id, one.id, "--comment", "go"], env);
    expect(approved.status).toBe(0);
    await waitFor(
      "the approved run to succeed",
      () => JSON.parse(cliRun(["runs", "get", wf.id, one.id, "--json"], env).stdout).status === "succeeded",
    );

    const two = startRun();
    await waiting(two);
    expect(JSON.parse(cliRun(["reject", wf.id, two.id, "--json"], env).stdout).status).toBe("failed");
    const three = startRun();
    await waiting(three);
    expect(JSON.parse(cliRun(["runs", "cancel", wf.id, three.id, "--json"], env).stdout).status).toBe("cancelled");

    const listed = jsonLines(cliRun(["runs", "list", "--workflow", wf.id, "--json"], env).stdout);
    expect(listed.map((r) => [r.id, r.status])).toEqual([
      [three.id, "cancelled"],
      [two.id, "failed"],
      [one.id, "succeeded"],
    ]);
    expect(cliRun(["runs", "list", "--status", "nope"], env)).toMatchObject({
      status: 2,
      stderr: expect.stringContaining("--status must be one of"),
    });
  });

  it("get and post reach any path", () => {
    expect(JSON.parse(cliRun(["get", "/me", "--json"], env).stdout).data.environment).toBe("test");
    const posted = JSON.parse(cliRun(["post", "/events", "--data", '{"type":"raw.sent","data":{"a":1}}', "--json"], env).stdout);
    expect(posted.data).toMatchObject({ type: "raw.sent", data: { a: 1 } });
  });
});

/** The CLI run to its end without blocking this process (a receiver in it must answer). */
function cliAsync(args: string[], envs: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI_JS, ...args], { env: { ...process.env, ...envs } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.once("close", (status) => done({ status, stdout, stderr }));
  });
}
