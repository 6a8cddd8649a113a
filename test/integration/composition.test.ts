import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../app/broker";
import { loadSettings } from "../../shared/config";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { tempDir } from "../helpers/cluster";

/**
 * The composition root (app/broker.ts) configures every service through its schema settings: two
 * brokers in one process each give their services their own settings, and none of it (the NATS
 * credentials among it) reaches another node in the INFO packets that describe the services.
 */
const PASSWORD = "composition-secret-5f2c";
let dir: { path: string; remove(): void };
let core: ServiceBroker;
let gateway: ServiceBroker;

/** Moleculer's in-process transporter: packets are serialized as over NATS, no server needed. */
const node = (name: string, services: string): ServiceBroker =>
  createBroker(
    loadSettings({
      ...{ TRANSPORTER: "nats://127.0.0.1:4222", NATS_USER: "platform", NATS_PASSWORD: PASSWORD },
      ...{ DATA_DIR: dir.path, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "false" },
      ...{ SERVICES: services, NODE_ID: name },
    }),
    { transporter: "Fake" },
  );

beforeAll(async () => {
  dir = tempDir();
  core = node("core", "keys,orgs,auth");
  gateway = node("edge", "gateway");
  await Promise.all([core.start(), gateway.start()]);
  await gateway.waitForServices(["keys", "orgs", "auth"]);
  await core.waitForServices(["gateway"]);
});

afterAll(async () => {
  await gateway?.stop();
  await core?.stop();
  dir?.remove();
});

/** The INFO packet `broker` received from `nodeID`: what that node told the others about its services. */
const infoOf = (broker: ServiceBroker, nodeID: string) =>
  broker.registry.nodes.get(nodeID)!.rawInfo as unknown as { services: { name: string; settings?: Record<string, unknown> }[] };

describe("services configured by the composition root", () => {
  it("gives each broker's services that broker's settings", () => {
    const keys = core.getLocalService("keys") as unknown as { settings: PlatformSettings };
    const gw = gateway.getLocalService("gateway") as unknown as { settings: PlatformSettings };
    expect(keys.settings.config.nodeId).toBe("core");
    expect(gw.settings.config.nodeId).toBe("edge");
    expect(gw.settings.config.nats).toMatchObject({ user: "platform", password: PASSWORD });
  });

  it("keeps the settings out of what other nodes learn about a service", () => {
    const info = infoOf(gateway, "core");
    expect(info.services.map((s) => s.name)).toEqual(expect.arrayContaining(["keys", "orgs", "auth"]));
    for (const service of info.services) expect(Object.keys(service.settings ?? {})).not.toEqual(expect.arrayContaining(["config"]));
    expect(JSON.stringify(info)).not.toContain(PASSWORD);
    const edge = infoOf(core, "edge");
    const gw = edge.services.find((s) => s.name === "gateway");
    // The gateway's own settings still travel; the platform's do not.
    expect(gw?.settings).toHaveProperty("ip", "0.0.0.0");
    expect(gw?.settings).not.toHaveProperty("config");
    expect(gw?.settings).not.toHaveProperty("store");
    expect(JSON.stringify(edge)).not.toContain(PASSWORD);
  });
});
