import { ServiceBroker, type Context } from "moleculer";
import { connect } from "nats";
import { brokerOptions } from "../../moleculer.config";
import { loadSettings } from "../../shared/config";
import { natsOptions } from "../../shared/runtime/transporter";
import { startNats, type NatsServer } from "../helpers/cluster";

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
