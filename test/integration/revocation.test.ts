import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../app/broker";
import { loadSettings } from "../../shared/config";
import { startNats, tempDir, waitFor, type NatsServer } from "../helpers/cluster";
import { api, expectError } from "../helpers/platform";
import { eventually } from "../../tools/eventually";

/**
 * Revocation to a gateway that is serving while the core's registry does not list it: lost after
 * missed heartbeats (a starved process, a slow network), or not announced yet (Moleculer announces
 * a node about a second after its gateway starts listening; seen failing the core cluster test).
 * Brokers in this process, over a real nats-server: the core (keys, auth, orgs), two
 * gateways, and later a second auth node.
 */
let nats: NatsServer;
let dir: { path: string; remove(): void };
const brokers: ServiceBroker[] = [];
let core: ServiceBroker;
let gw2: ServiceBroker;
let g1: string;
let g2: string;
let admin: string;

function node(name: string, services: string): ServiceBroker {
  const settings = loadSettings({
    TRANSPORTER: nats.url,
    DATA_DIR: dir.path,
    SERVICES: services,
    NODE_ID: name,
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "false",
  });
  const broker = createBroker(settings);
  brokers.push(broker);
  return broker;
}

const urlOf = (broker: ServiceBroker) =>
  `http://127.0.0.1:${(broker.getLocalService("gateway") as unknown as { server: { address(): { port: number } } }).server.address().port}/v1`;

beforeAll(async () => {
  nats = await startNats();
  dir = tempDir();
  core = node("core", "keys,auth,orgs");
  const gw1 = node("gw1", "gateway");
  gw2 = node("gw2", "gateway");
  await Promise.all([core.start(), gw1.start(), gw2.start()]);
  await Promise.all([gw1, gw2, core].map((b) => b.waitForServices(["auth", "keys", "orgs"])));
  await core.waitForServices(["gateway"]);
  const made = await core.call<{ api_keys: { key: string; environment: string }[] }, { name: string }>("orgs.create", { name: "Acme" });
  admin = made.api_keys.find((k) => k.environment === "live")!.key;
  g1 = urlOf(gw1);
  g2 = urlOf(gw2);
});

afterAll(async () => {
  for (const broker of brokers.reverse()) await broker.stop().catch(() => undefined);
  await nats?.stop();
  dir?.remove();
});

type Registry = {
  nodes: { disconnected(id: string, unexpected: boolean): void; delete(id: string): void };
  unregisterServicesByNode(id: string): void;
};
const registryOf = (broker: ServiceBroker) => broker.registry as unknown as Registry;
/** What missed heartbeats do to a node in `broker`'s registry. */
const loseSightOf = (broker: ServiceBroker, id: string) => registryOf(broker).nodes.disconnected(id, true);
/** A node `broker` never heard announce itself, and never saw leave. */
const neverListed = (broker: ServiceBroker, id: string) => {
  registryOf(broker).unregisterServicesByNode(id);
  registryOf(broker).nodes.delete(id);
};

const gatewayNodesSeenBy = (broker: ServiceBroker) =>
  broker.registry
    .getServiceList({ onlyAvailable: true, skipInternal: true })
    .filter((s) => s.name === "gateway")
    .map((s) => s.nodeID);

/** A key cached on gw2, then `hide` takes gw2 out of the core's registry, then g1 revokes the key: gw2 must refuse it. */
async function revokeWhileHidden(name: string, hide: (broker: ServiceBroker, id: string) => void): Promise<void> {
  const made = (await api(g1, "POST", "/api-keys", { key: admin, body: { name, scopes: ["api-keys:read"] } })).body.data;
  expect((await api(g2, "GET", "/api-keys?per_page=1", { key: made.key })).status).toBe(200);

  hide(core, "gw2");
  expect(gatewayNodesSeenBy(core)).not.toContain("gw2");

  const revoked = await api(g1, "DELETE", `/api-keys/${made.id}`, { key: admin });
  expect(revoked.status).toBe(200);
  expectError(await api(g2, "GET", "/api-keys?per_page=1", { key: made.key }), 401, "api_key_revoked");
}

describe("revocation while the core has lost sight of a live gateway", () => {
  it("still reaches that gateway before the revocation answers", async () => {
    // What the core's heartbeat check does when gw2's heartbeats stop arriving for a while.
    await revokeWhileHidden("k", loseSightOf);
  });

  it("reaches a gateway that serves before the core's registry lists it", async () => {
    // As in the second after a gateway starts: it serves (and caches) before Moleculer announces
    // it, so the core's registry does not list it, and no disconnect was ever seen.
    await revokeWhileHidden("k0", neverListed);
  });

  it("reaches such a gateway through any auth node, though it resolved its keys on another", async () => {
    const auth2 = node("auth2", "auth");
    await auth2.start();
    await auth2.waitForServices(["keys", "orgs", "gateway"]);
    const authNodes = () =>
      gw2.registry
        .getServiceList({ onlyAvailable: true })
        .filter((s) => s.name === "auth")
        .map((s) => s.nodeID);
    await eventually("both auth nodes listed", () => authNodes().length >= 2, 5000, 20).catch(() => undefined);
    expect(authNodes().sort()).toEqual(["auth2", "core"]);

    // One lookup on gw2: one of the two auth nodes answers it; both must learn that gw2 may cache.
    const made = (await api(g1, "POST", "/api-keys", { key: admin, body: { name: "k1", scopes: ["api-keys:read"] } })).body.data;
    expect((await api(g2, "GET", "/api-keys?per_page=1", { key: made.key })).status).toBe(200);
    const resolversOf = (broker: ServiceBroker) =>
      (broker.getLocalService("auth") as unknown as { resolvers: Map<string, number> }).resolvers;
    await waitFor("both auth nodes told that gw2 resolved a key", () => [core, auth2].every((b) => resolversOf(b).has("gw2")), 5000);
    for (const broker of [core, auth2]) neverListed(broker, "gw2");
    // Each auth node in turn, as keys.revoke may reach either: each finds gw2 and has it confirm.
    for (const nodeID of ["core", "auth2"]) {
      const answer = await core.call<{ confirmed: number; unreachable: string[] }, object>(
        "auth.invalidate",
        { key_id: made.id },
        { nodeID },
      );
      expect({ nodeID, ...answer }).toEqual({ nodeID, confirmed: 2, unreachable: [] });
    }
  });

  it("answers anyway, a few seconds later, when the lost gateway is really gone", async () => {
    const made = (await api(g1, "POST", "/api-keys", { key: admin, body: { name: "k2", scopes: ["api-keys:read"] } })).body.data;
    // gw2's connection drops without a goodbye (a crash); the core notices as after missed heartbeats.
    await (gw2.transit as unknown as { tx: { disconnect(): Promise<void> } }).tx.disconnect();
    loseSightOf(core, "gw2");

    const revoked = await api(g1, "DELETE", `/api-keys/${made.id}`, { key: admin });
    expect(revoked.status).toBe(200);
    expect(revoked.body.data.status).toBe("revoked");
    expectError(await api(g1, "GET", "/api-keys?per_page=1", { key: made.key }), 401, "api_key_revoked");
  });
});
