import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, runCli, startNats, startNode, waitFor, waitForServerMark, type NatsServer, type Proc } from "../../tools/procs";
import { api } from "./platform";

export { freePort, runCli, startNats, startNode, waitFor, type NatsServer, type Proc as NodeProc } from "../../tools/procs";

/** Until the gateway answers and reaches the services a key lookup needs. */
export async function waitForGateway(baseUrl: string, key: string): Promise<void> {
  await waitFor(`${baseUrl} to serve`, async () => (await api(baseUrl, "GET", "/api-keys?per_page=1", { key })).status === 200);
}

/**
 * A gauge from a node's Prometheus metrics (the node runs with METRICS_PORT), summed over the series
 * whose labels include `labels`: e.g. how many nodes its registry lists for a service
 * (`moleculer_registry_service_endpoints_total`, `{ service }`), or its calls in flight
 * (`moleculer_request_active`).
 */
export async function metric(metricsUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const has = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => [k, v]));
    if (Object.entries(labels).every(([k, v]) => has[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/** Until the node serving `metricsUrl` lists `count` nodes running `service` (so it balances calls and events over them). */
export async function waitForNodes(metricsUrl: string, service: string, count: number, timeoutMs = 30_000): Promise<void> {
  await waitFor(
    `${metricsUrl} to list ${count} nodes running ${service}`,
    async () => (await metric(metricsUrl, "moleculer_registry_service_endpoints_total", { service })) >= count,
    timeoutMs,
  );
}

export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "wfp-c-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A whole platform in one server process on a DATA_DIR of its own, and a test key of an organization the CLI made there. */
export interface CliServer {
  dir: { path: string; remove(): void };
  server: Proc;
  gw: string;
  key: string;
  /** What the CLI as a process needs: the API, the key, the store. */
  env: Record<string, string>;
}

/** Starts what the CLI suites run against (`env`: more settings of the server); answers once it answers with the key. */
export async function startCliServer(name: string, org: string, env: Record<string, string> = {}): Promise<CliServer> {
  const dir = tempDir();
  const port = await freePort();
  const server = startNode(name, { DATA_DIR: dir.path, PORT: String(port), ...env });
  const gw = `http://127.0.0.1:${port}/v1`;
  try {
    await waitForServerMark(dir.path, server);
    const key = runCli(["orgs", "create", "--name", org], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "test")!.key;
    await waitForGateway(gw, key);
    return { dir, server, gw, key, env: { API_URL: gw, API_KEY: key, DATA_DIR: dir.path } };
  } catch (err) {
    await server.kill();
    dir.remove();
    throw err;
  }
}

/**
 * The local ports of the TCP connections process `pid` holds to `remotePort` on 127.0.0.1 (Linux:
 * its socket descriptors matched against /proc/net/tcp), so a receiver can tell which node sent what.
 */
export function connectionsOf(pid: number, remotePort: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed while we looked
    }
  }
  const ports = new Set<number>();
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || !inodes.has(f[9])) continue;
    if (parseInt(f[2].split(":")[1], 16) === remotePort) ports.add(parseInt(f[1].split(":")[1], 16));
  }
  return ports;
}

/**
 * With CLUSTER_LOGS=<prefix>, a suite's nodes' output is written to `<prefix>.<suite>.log` (each
 * suite its own file), and `clusterLogLevel()` asks the nodes for debug lines.
 */
export function saveClusterLogs(suite: string, nodes: Proc[]): void {
  const prefix = process.env.CLUSTER_LOGS;
  if (prefix) writeFileSync(`${prefix}.${suite}.log`, nodes.map((n) => `--- ${n.name}\n${n.output()}`).join("\n"));
}

export const clusterLogLevel = (): { LOG_LEVEL: string } => ({ LOG_LEVEL: process.env.CLUSTER_LOGS ? "debug" : "warn" });

/** A cluster's shared parts: its nats-server, data directory, settings every node gets, the API's address and an admin key. */
export interface ApiCluster {
  nats: NatsServer;
  dir: { path: string; remove(): void };
  common: Record<string, string>;
  gw: string;
  admin: string;
}

/**
 * A real nats-server, a fresh data directory and an API node (every service but workflows, pushed
 * onto `nodes` for the suite to kill), with the live admin key of a new organization `org`.
 */
export async function startApiCluster(nodes: Proc[], org: string, env: Record<string, string> = {}): Promise<ApiCluster> {
  const nats = await startNats();
  const dir = tempDir();
  const common = { TRANSPORTER: nats.url, DATA_DIR: dir.path, RATE_LIMIT_MAX: "100000", ...env };
  const port = await freePort();
  nodes.push(startNode("api", { ...common, SERVICES: "gateway,auth,keys,orgs,events,webhooks", PORT: String(port) }));
  const gw = `http://127.0.0.1:${port}/v1`;
  let admin = "";
  await waitFor("the bootstrap CLI", async () => {
    admin = runCli(["orgs", "create", "--name", org], { DATA_DIR: dir.path }).api_keys.find((k) => k.environment === "live")!.key;
    return true;
  });
  await waitForGateway(gw, admin);
  return { nats, dir, common, gw, admin };
}

/** A workflows node of `cluster` (pushed onto `nodes`), once the gateway reaches the service. */
export async function startWorkflowsNode(cluster: ApiCluster, nodes: Proc[], name: string): Promise<Proc> {
  const node = startNode(name, { ...cluster.common, SERVICES: "workflows" });
  nodes.push(node);
  await waitFor(
    `${name} to serve`,
    async () => (await api(cluster.gw, "GET", "/workflows", { key: cluster.admin })).status === 200,
    30_000,
  );
  return node;
}
