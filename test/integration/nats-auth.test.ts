import { ServiceBroker, type Context } from "moleculer";
import { connect } from "nats";
import { brokerOptions } from "../../moleculer.config";
import { loadSettings } from "../../shared/config";
import { natsOptions } from "../../shared/runtime/transporter";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startNats, waitFor, type NatsServer } from "../helpers/cluster";

/**
 * The bus is closed: the nats-server the tests and `npm run cluster` start (as docker-compose's)
 * takes no client without its credentials, and nodes given them through the settings talk as before.
 */
jest.setTimeout(30_000);

let nats: NatsServer;
const brokers: ServiceBroker[] = [];

beforeAll(async () => {
  nats = await startNats();
});

afterAll(async () => {
  for (const b of brokers) await b.stop().catch(() => undefined);
  await nats?.stop();
});

const servers = () => [`127.0.0.1:${nats.port}`];

describe("nats-server", () => {
  it("refuses a client without credentials", async () => {
    await expect(connect({ servers: servers(), reconnect: false })).rejects.toThrow(/Authorization Violation/i);
  });

  it("refuses a client with a wrong password, or the right password for another user", async () => {
    await expect(connect({ servers: servers(), user: nats.user, pass: `${nats.password}x`, reconnect: false })).rejects.toThrow(
      /Authorization Violation/i,
    );
    await expect(connect({ servers: servers(), user: "admin", pass: nats.password, reconnect: false })).rejects.toThrow(
      /Authorization Violation/i,
    );
    await expect(connect({ servers: servers(), token: nats.password, reconnect: false })).rejects.toThrow(/Authorization Violation/i);
  });

  it("takes the client with the credentials", async () => {
    const client = await connect({ servers: servers(), user: nats.user, pass: nats.password, reconnect: false });
    await client.flush();
    await client.close();
  });
});

describe("nodes with NATS_USER and NATS_PASSWORD", () => {
  it("call each other over the authenticated bus", async () => {
    const node = (name: string) => {
      const settings = loadSettings({ TRANSPORTER: nats.address, ...nats.env, NODE_ID: name, LOG_LEVEL: "false" });
      const b = new ServiceBroker(brokerOptions(settings, { namespace: "nats-auth-test" }));
      brokers.push(b);
      return b;
    };
    const server = node("server");
    server.createService({ name: "echo", actions: { say: (ctx: Context<{ text: string }>) => `heard ${ctx.params.text}` } });
    const client = node("client");
    await Promise.all([server.start(), client.start()]);
    await client.waitForServices(["echo"], 10_000);
    expect(await client.call("echo.say", { text: "hi" })).toBe("heard hi");
  });
});

describe("natsOptions", () => {
  it("takes the credentials from the settings, else from the URL, and never passes the URL itself", () => {
    expect(natsOptions("nats://a:4222,nats://b:4222", { user: "u", password: "p" })).toMatchObject({
      servers: ["a:4222", "b:4222"],
      user: "u",
      pass: "p",
    });
    expect(natsOptions("nats://u%40x:p%2F1@a:4222", {})).toMatchObject({ servers: ["a:4222"], user: "u@x", pass: "p/1" });
    expect(natsOptions("nats://u:p@a:4222", { token: "t" })).toMatchObject({ token: "t" });
    expect(natsOptions("nats://u:p@a:4222", { token: "t" })).not.toHaveProperty("user");
    expect(natsOptions("nats://a:4222", { tls: { caFile: "/ca.pem" } })).toMatchObject({ tls: { caFile: "/ca.pem" } });
    expect(natsOptions("nats://a:4222", {})).not.toHaveProperty("url");
    expect(natsOptions("nats://a:4222", {})).not.toHaveProperty("user");
  });

  it("refuses half-given credentials and missing TLS files at start", () => {
    expect(() => loadSettings({ NATS_USER: "u" })).toThrow(/NATS_PASSWORD/);
    expect(() => loadSettings({ NATS_PASSWORD: "p" })).toThrow(/NATS_USER/);
    expect(() => loadSettings({ NATS_USER: "u", NATS_PASSWORD: "p", NATS_TOKEN: "t" })).toThrow(/NATS_TOKEN/);
    expect(() => loadSettings({ NATS_TLS_CA: "/nowhere/ca.pem" })).toThrow(/NATS_TLS_CA/);
    expect(() => loadSettings({ NATS_TLS_CERT: __filename })).toThrow(/NATS_TLS_KEY/);
    expect(loadSettings({ NATS_USER: "u", NATS_PASSWORD: "p" }).nats).toEqual({ user: "u", password: "p" });
    expect(loadSettings({}).nats).toEqual({});
  });
});

describe("the nats.conf of docs/operations", () => {
  /** The block marked `<!-- test: nats.conf -->` in the operations guide, as a reader copies it. */
  const documented = () => {
    const text = readFileSync(join(__dirname, "../../docs/operations/README.md"), "utf8");
    const block = /<!-- test: nats\.conf -->\s*```\n([\s\S]*?)```/.exec(text);
    if (!block) throw new Error("docs/operations/README.md has no block marked <!-- test: nats.conf -->");
    return block[1];
  };

  /** nats-server run on `config` with NATS_PASSWORD in its environment; answers whether `password` gets in. */
  async function admits(config: string, password: string): Promise<boolean> {
    const dir = mkdtempSync(join(tmpdir(), "wfp-natsconf-"));
    const file = join(dir, "nats.conf");
    writeFileSync(file, config, { mode: 0o600 });
    const port = await freePort();
    const server = spawn("nats-server", ["-c", file, "-a", "127.0.0.1", "-p", String(port)], {
      env: { ...process.env, NATS_PASSWORD: "from-the-environment" },
      stdio: "ignore",
    });
    try {
      await waitFor(
        "nats-server to listen",
        () =>
          new Promise<boolean>((ok) => {
            const socket = netConnect(port, "127.0.0.1");
            socket.once("connect", () => (socket.destroy(), ok(true)));
            socket.once("error", () => ok(false));
          }),
        10_000,
      );
      const client = await connect({ servers: [`127.0.0.1:${port}`], user: "wfp", pass: password, reconnect: false }).catch(() => null);
      await client?.close();
      return client !== null;
    } finally {
      server.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it("takes its password from NATS_PASSWORD in nats-server's environment, not the text '$NATS_PASSWORD'", async () => {
    const config = documented();
    expect(config).toContain("$NATS_PASSWORD");
    expect(await admits(config, "from-the-environment")).toBe(true);
    expect(await admits(config, "$NATS_PASSWORD")).toBe(false);
    // The quoted form the guide once showed is taken literally: the environment's password is refused.
    expect(await admits(config.replace("$NATS_PASSWORD", '"$NATS_PASSWORD"'), "from-the-environment")).toBe(false);
  });
});
