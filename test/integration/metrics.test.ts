import { networkInterfaces, userInfo } from "node:os";
import { ServiceBroker } from "moleculer";
import { brokerOptions } from "../../moleculer.config";
import { loadSettings } from "../../shared/config";
import { freePort } from "../helpers/cluster";

/**
 * METRICS_PORT: the Prometheus listener binds HOST unless METRICS_HOST says otherwise, and exports
 * nothing about the machine's user, addresses or the process's command line.
 */
jest.setTimeout(30_000);

/** An address of this machine other than loopback, if it has one. */
const outward = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === "IPv4" && !i.internal)?.address;

const reachable = (host: string, port: number) =>
  fetch(`http://${host}:${port}/metrics`, { signal: AbortSignal.timeout(2_000) }).then(
    (r) => r.status,
    () => "refused",
  );

async function withMetrics(env: Record<string, string>, check: (port: number) => Promise<void>): Promise<void> {
  const port = await freePort();
  // Moleculer collects the process and OS figures only outside NODE_ENV=test, which jest sets.
  const nodeEnv = process.env.NODE_ENV;
  process.env.NODE_ENV = "production";
  const broker = new ServiceBroker(brokerOptions(loadSettings({ METRICS_PORT: String(port), LOG_LEVEL: "false", ...env })));
  process.env.NODE_ENV = nodeEnv;
  await broker.start();
  try {
    await check(port);
  } finally {
    await broker.stop();
  }
}

describe("the metrics listener", () => {
  it("listens where the API does (HOST) unless METRICS_HOST says otherwise", async () => {
    await withMetrics({ HOST: "127.0.0.1" }, async (port) => {
      expect(await reachable("127.0.0.1", port)).toBe(200);
      if (outward) expect(await reachable(outward, port)).toBe("refused");
    });
    expect(loadSettings({}).metricsHost).toBe("0.0.0.0");
    expect(loadSettings({ HOST: "0.0.0.0", METRICS_HOST: "127.0.0.1" }).metricsHost).toBe("127.0.0.1");
  });

  it("listens where METRICS_HOST says", async () => {
    await withMetrics({ METRICS_HOST: "0.0.0.0" }, async (port) => {
      expect(await reachable("127.0.0.1", port)).toBe(200);
      if (outward) expect(await reachable(outward, port)).toBe(200);
    });
    expect(() => loadSettings({ METRICS_HOST: "every interface" })).toThrow(/METRICS_HOST/);
  });

  it("exports no OS user, home directory, host name, network address or process argument", async () => {
    await withMetrics({}, async (port) => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      // Still the platform's own figures.
      expect(text).toMatch(/process_memory_heap_size_used/);
      for (const name of ["os_user_", "os_network_", "os_hostname", "process_arguments"])
        expect({ name, found: text.includes(name) }).toEqual({ name, found: false });
      expect(text).not.toContain(userInfo().homedir);
      expect(text).not.toContain(process.argv[1]);
      if (outward) expect(text).not.toContain(outward);
    });
  });
});
