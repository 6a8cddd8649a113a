import { api, expectError } from "../helpers/platform";
import {
  clusterLogLevel,
  freePort,
  metric,
  runCli,
  saveClusterLogs,
  startNats,
  startNode,
  tempDir,
  waitFor,
  waitForGateway,
  waitForNodes,
  type NatsServer,
  type NodeProc,
} from "../helpers/cluster";
import { eventually } from "../../tools/eventually";

/**
 * Four processes over a real nats-server, all on one SQLite file: keys and auth, orgs on its own, and two
 * gateways. Driven over HTTP only.
 */
jest.setTimeout(90_000);
// No retries: the revocation flake this suite once had (a DELETE within the second in which the
// gateways served before Moleculer announced them) is fixed in auth, which also tells every node
// that resolved a token lately (test/integration/revocation.test.ts). CLUSTER_LOGS=<prefix> writes
// the nodes' debug logs to <prefix>.core.log.

let nats: NatsServer;
let dir: { path: string; remove(): void };
const nodes: NodeProc[] = [];
let g1: string;
let g2: string;
/** gw2's Prometheus metrics: its calls in flight. */
let gw2Metrics: string;
let orgsNode: NodeProc;
let admin: string;
let orgId: string;

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  // A long rate window makes the cluster-wide limit exact to test; 100 per key in all.
  const common = {
    ...clusterLogLevel(),
    TRANSPORTER: nats.url,
    DATA_DIR: dir.path,
    RATE_LIMIT_MAX: "100",
    RATE_LIMIT_WINDOW_MS: "3600000",
  };
  const [p1, p2, m2] = [await freePort(), await freePort(), await freePort()];
  nodes.push(startNode("core", { ...common, SERVICES: "keys,auth" }));
  orgsNode = startNode("orgs", { ...common, SERVICES: "orgs" });
  nodes.push(orgsNode);
  nodes.push(startNode("gw1", { ...common, SERVICES: "gateway", PORT: String(p1) }));
  nodes.push(startNode("gw2", { ...common, SERVICES: "gateway", PORT: String(p2), METRICS_PORT: String(m2) }));
  gw2Metrics = `http://127.0.0.1:${m2}/metrics`;
  g1 = `http://127.0.0.1:${p1}/v1`;
  g2 = `http://127.0.0.1:${p2}/v1`;
  // The bootstrap CLI opens the same database file as the running nodes.
  await waitFor("the bootstrap CLI", async () => {
    const out = runCli(["orgs", "create", "--name", "Cluster Co"], { DATA_DIR: dir.path });
    admin = out.api_keys.find((k) => k.environment === "live")!.key;
    orgId = out.org.id;
    return true;
  });
  await waitForGateway(g1, admin);
  await waitForGateway(g2, admin);
});

afterAll(async () => {
  saveClusterLogs("core", nodes);
  await Promise.all(nodes.map((n) => n.kill("SIGKILL")));
  await nats?.stop();
  dir?.remove();
});

const newKey = async (scopes: string[]) =>
  (await api(g1, "POST", "/api-keys", { key: admin, body: { name: "k", scopes } })).body.data as { id: string; key: string };

describe("the core over NATS", () => {
  it("serves every gateway from one shared store", async () => {
    const made = await newKey(["api-keys:read"]);
    const seen = await api(g2, "GET", `/api-keys/${made.id}`, { key: made.key });
    expect(seen.status).toBe(200);
    expect(seen.body.data.id).toBe(made.id);
    const org = await api(g2, "GET", `/orgs/${orgId}`, { key: admin });
    expect(org.body.data.name).toBe("Cluster Co");
  });

  it("refuses a key revoked through one gateway on the very next request to the other", async () => {
    for (let i = 0; i < 10; i += 1) {
      const made = await newKey(["api-keys:read"]);
      // Both gateways have the key cached as active.
      expect((await api(g1, "GET", "/api-keys?per_page=1", { key: made.key })).status).toBe(200);
      expect((await api(g2, "GET", "/api-keys?per_page=1", { key: made.key })).status).toBe(200);
      const revoked = await api(g1, "DELETE", `/api-keys/${made.id}`, { key: admin });
      expect(revoked.status).toBe(200);
      expectError(await api(g2, "GET", "/api-keys?per_page=1", { key: made.key }), 401, "api_key_revoked");
    }
  });

  it("answers 401 api_key_revoked to a request in flight when its key is revoked", async () => {
    const made = await newKey(["org:admin"]);
    expect((await api(g2, "GET", `/orgs/${orgId}`, { key: made.key })).status).toBe(200);
    // Freeze the orgs node so the next request stays in flight inside the cluster.
    orgsNode.child.kill("SIGSTOP");
    try {
      const inFlight = api(g2, "GET", `/orgs/${orgId}`, { key: made.key });
      await waitFor(
        "gw2's call to the frozen orgs node in flight",
        async () => (await metric(gw2Metrics, "moleculer_request_active", { service: "orgs" })) > 0,
        10_000,
      );
      // The revocation reaches every gateway before keys.revoke answers; the request's answer then waits
      // for its audit log entry, which the frozen orgs node stores: a second call to orgs in flight on gw2.
      const revoking = api(g2, "DELETE", `/api-keys/${made.id}`, { key: admin });
      await waitFor(
        "the revocation's audit entry in flight to the frozen orgs node",
        async () => (await metric(gw2Metrics, "moleculer_request_active", { service: "orgs" })) > 1,
        10_000,
      );
      orgsNode.child.kill("SIGCONT");
      expectError(await inFlight, 401, "api_key_revoked");
      expect((await revoking).status).toBe(200);
    } finally {
      orgsNode.child.kill("SIGCONT");
    }
  });

  it("answers 503 with Retry-After while a service has no live node, and recovers", async () => {
    // Each wait below polls the API with a key of its own: a key's budget here is 100 requests an
    // hour, 50 per gateway, which one wait alone may spend on a busy machine (then every answer is 429).
    const { key } = await newKey(["org:admin"]);
    const { key: later } = await newKey(["org:admin"]);
    expect((await api(g1, "GET", `/orgs/${orgId}`, { key })).status).toBe(200);
    await orgsNode.kill("SIGTERM");
    await waitFor("orgs to leave the registry", async () => (await api(g1, "GET", `/orgs/${orgId}`, { key })).status === 503);
    const res = await api(g1, "GET", `/orgs/${orgId}`, { key });
    expectError(res, 503, "service_unavailable");
    expect(res.headers["retry-after"]).toBe("1");
    orgsNode = startNode("orgs2", { TRANSPORTER: nats.url, DATA_DIR: dir.path, SERVICES: "orgs" });
    nodes.push(orgsNode);
    // From the registry first (no request spent), then at most 40 requests in 20 s: within the key's share.
    await waitForNodes(gw2Metrics, "orgs", 1);
    // Should it not come back, the failure says why: the last answer, and the new node's state and output.
    await eventually(
      "orgs to come back",
      async () => {
        const res = await api(g1, "GET", `/orgs/${orgId}`, { key: later });
        if (res.status === 200) return true;
        const state = orgsNode.child.exitCode !== null ? `exited with ${orgsNode.child.exitCode}` : "running";
        throw new Error(
          `answered ${res.status} ${JSON.stringify(res.body)}; orgs2 ${state}; its output: ${orgsNode.output().slice(-3000)}`,
        );
      },
      20_000,
      500,
    );
  });

  it("holds the rate limit for the cluster, not per gateway", async () => {
    // Two live gateways: each admits its share, 50 of the key's 100.
    const made = await newKey(["api-keys:read"]);
    const admitted = { g1: 0, g2: 0 };
    let refused;
    for (let i = 0; i < 60; i += 1) {
      const [a, b] = await Promise.all([
        api(g1, "GET", "/api-keys?per_page=1", { key: made.key }),
        api(g2, "GET", "/api-keys?per_page=1", { key: made.key }),
      ]);
      admitted.g1 += Number(a.status === 200);
      admitted.g2 += Number(b.status === 200);
      if (a.status === 429) refused = a;
    }
    expect(admitted).toEqual({ g1: 50, g2: 50 });
    expectError(refused!, 429, "rate_limited");
    expect(refused!.headers["ratelimit-limit"]).toBe("100");
    expect(Number(refused!.headers["retry-after"])).toBeGreaterThan(0);
  });
});
