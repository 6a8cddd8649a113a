import { createServer, connect, type Server, type Socket } from "node:net";
import { api, expectError, type ApiResponse } from "../helpers/platform";
import {
  clusterLogLevel,
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

/**
 * A gateway cut off from NATS: one gateway reaches nats-server through a TCP proxy the test cuts
 * and restores, the other directly, with keys, auth and orgs on a node of their own; every node
 * logs in to NATS with NATS_USER and NATS_PASSWORD. A key revoked through the other gateway during
 * the cut is refused by the cut-off gateway on its first request after it reconnects, and while it
 * cannot hear the bus beyond the bound (2 s) it answers 503 rather than trust its cache.
 */
jest.setTimeout(120_000);

/** A TCP proxy to nats-server; `cut()` drops every connection and refuses new ones until `restore()`. */
class Proxy {
  private readonly sockets = new Set<Socket>();
  private open = true;
  readonly server: Server;

  constructor(private readonly target: number) {
    this.server = createServer((client) => {
      if (!this.open) return void client.destroy();
      const upstream = connect(this.target, "127.0.0.1");
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ]) {
        this.sockets.add(a);
        a.pipe(b);
        a.on("error", () => b.destroy());
        a.on("close", () => {
          this.sockets.delete(a);
          b.destroy();
        });
      }
    });
  }

  listen(port: number): Promise<void> {
    return new Promise((ok) => this.server.listen(port, "127.0.0.1", () => ok()));
  }

  cut(): void {
    this.open = false;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.open = true;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((ok) => this.server.close(() => ok()));
  }
}

let nats: NatsServer;
let proxy: Proxy;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let cutOff: string;
let other: string;
let admin: string;

beforeAll(async () => {
  nats = await startNats();
  proxy = new Proxy(nats.port);
  const proxyPort = await freePort();
  await proxy.listen(proxyPort);
  dir = tempDir();
  const common = { ...clusterLogLevel(), ...nats.env, DATA_DIR: dir.path, RATE_LIMIT_MAX: "100000" };
  const [p1, p2] = [await freePort(), await freePort()];
  nodes.push(startNode("core", { ...common, TRANSPORTER: nats.address, SERVICES: "keys,auth,orgs" }));
  nodes.push(startNode("gw-cut", { ...common, TRANSPORTER: `nats://127.0.0.1:${proxyPort}`, SERVICES: "gateway", PORT: String(p1) }));
  nodes.push(startNode("gw-other", { ...common, TRANSPORTER: nats.address, SERVICES: "gateway", PORT: String(p2) }));
  cutOff = `http://127.0.0.1:${p1}/v1`;
  other = `http://127.0.0.1:${p2}/v1`;
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", "Partition Co"], { DATA_DIR: dir.path }).api_keys.find(
      (k) => k.environment === "live",
    )!.key;
    return true;
  });
  await waitForGateway(cutOff, admin);
  await waitForGateway(other, admin);
});

afterAll(async () => {
  saveClusterLogs("partition", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await proxy?.close();
  await nats?.stop();
  dir?.remove();
});

const ready = async (base: string) => (await fetch(base.replace(/\/v1$/, "/ready"))).status;

describe("a gateway cut off from NATS", () => {
  it("answers 503 beyond the bound, and refuses a key revoked meanwhile on its first request after it reconnects", async () => {
    const made = (await api(other, "POST", "/api-keys", { key: admin, body: { name: "doomed", scopes: ["api-keys:read"] } })).body.data as {
      id: string;
      key: string;
    };
    // The cut-off gateway holds the key in its cache as active.
    expect((await api(cutOff, "GET", "/api-keys?per_page=1", { key: made.key })).status).toBe(200);

    proxy.cut();
    const cutAt = Date.now();
    await waitFor("the cut-off gateway to call itself not ready", async () => (await ready(cutOff)) === 503, 10_000);
    const notReadyAfterMs = Date.now() - cutAt;

    const revoked = await api(other, "DELETE", `/api-keys/${made.id}`, { key: admin });
    expect(revoked.status).toBe(200);
    // Cut off beyond the bound: no cached identity is trusted, the revoked key's nor the admin's.
    const during = await api(cutOff, "GET", "/api-keys?per_page=1", { key: made.key });
    expectError(during, 503, "service_unavailable");
    expect(during.headers["retry-after"]).toBe("1");
    expectError(await api(cutOff, "GET", "/api-keys?per_page=1", { key: admin }), 503, "service_unavailable");
    const cutForMs = Date.now() - cutAt;

    proxy.restore();
    const restoredAt = Date.now();
    await waitFor("the cut-off gateway to be ready again", async () => (await ready(cutOff)) === 200, 30_000);
    const readyAfterMs = Date.now() - restoredAt;
    expectError(await api(cutOff, "GET", "/api-keys?per_page=1", { key: made.key }), 401, "api_key_revoked");
    expect((await api(cutOff, "GET", "/api-keys?per_page=1", { key: admin })).status).toBe(200);
    process.stdout.write(`partition: ${JSON.stringify({ notReadyAfterMs, cutForMs, readyAfterMs })}\n`);
    expect(notReadyAfterMs).toBeLessThan(3_000);
  });

  it("drops its cache on a reconnect shorter than the bound", async () => {
    proxy.restore();
    await waitFor("the cut-off gateway to be ready", async () => (await ready(cutOff)) === 200, 30_000);
    const made = (await api(other, "POST", "/api-keys", { key: admin, body: { name: "short", scopes: ["api-keys:read"] } })).body.data as {
      id: string;
      key: string;
    };
    expect((await api(cutOff, "GET", "/api-keys?per_page=1", { key: made.key })).status).toBe(200);
    proxy.cut();
    const revoking = api(other, "DELETE", `/api-keys/${made.id}`, { key: admin });
    // Restored once the revocation is stored: its invalidation then goes out while the gateway is
    // cut off (the DELETE answers when every gateway confirmed or could not be reached).
    await waitFor(
      "the revocation stored",
      async () => (await api(other, "GET", `/api-keys/${made.id}`, { key: admin })).body.data?.status === "revoked",
      10_000,
    );
    proxy.restore();
    expect((await revoking).status).toBe(200);
    // The revocation was answered after its wait for this gateway's confirmation: from here the
    // gateway answers 503 (silent past the bound, or not yet answered over the bus again) or, once
    // it has reconnected and dropped its cache, 401; never the revoked key's 200. Waiting for /ready
    // instead was not enough: CI once saw a 503 right after /ready answered 200.
    let answer: ApiResponse | undefined;
    await waitFor(
      "the cut-off gateway to answer from the bus again",
      async () => {
        answer = await api(cutOff, "GET", "/api-keys?per_page=1", { key: made.key });
        if (answer.status !== 503) return true;
        expectError(answer, 503, "service_unavailable");
        return false;
      },
      30_000,
    );
    expectError(answer!, 401, "api_key_revoked");
  });
});
