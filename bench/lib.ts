import { fork, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { Pool, request } from "undici";
import { freePort, runCli, startNats, startNode, waitFor, type NatsServer } from "../tools/procs";

/** What the benchmarks share: the receiver process, the bare loop, pacing and figures. */

export interface Stats {
  count: number;
  unique: number;
  first: number;
  last: number;
  latencies: number[];
}

/** Wall-clock ms with sub-ms precision, comparable across processes on this machine. */
export const now = (): number => performance.timeOrigin + performance.now();
export const rate = (s: Stats): number => (s.count > 1 ? Math.round(((s.count - 1) * 1000) / (s.last - s.first)) : 0);
export const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
export const quantile = (xs: number[], q: number): number =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;

/** CPU time (user + system, all threads) of a process in ms, from /proc. */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The receiver process (bench/webhook-receiver.ts) and its IPC questions. */
export class Receiver {
  private constructor(
    readonly child: ChildProcess,
    readonly origin: string,
  ) {}

  static async start(): Promise<Receiver> {
    const port = await freePort();
    const child = fork(join(__dirname, "webhook-receiver.js"), [String(port)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    await new Promise((ok) => child.once("message", ok));
    return new Receiver(child, `http://127.0.0.1:${port}`);
  }

  get url(): string {
    return `${this.origin}/hook`;
  }

  private ask<T>(msg: string): Promise<T> {
    return new Promise((ok) => {
      this.child.once("message", (m) => ok(m as T));
      this.child.send(msg);
    });
  }

  reset = () => this.ask<unknown>("reset");
  stats = () => this.ask<Stats>("stats");
  /** Deliveries received so far (distinct events), without the latencies. */
  count = () => this.ask<{ unique: number }>("count");

  async waitForUnique(n: number, timeoutMs: number): Promise<Stats> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      // Only the count while waiting: the latencies (thousands) are copied once, at the end, so the
      // receiver's polling costs the platform under test no CPU.
      const { unique } = await this.count();
      if (unique >= n) return this.stats();
      if (Date.now() > until) throw new Error(`receiver: ${unique} of ${n} arrived within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  stop(): void {
    this.child.kill("SIGKILL");
  }
}

/** Runs bench/<script>.js in a process of its own (a core to itself) and answers the JSON it prints. */
export async function runScript<T>(script: string, args: (string | number)[]): Promise<T> {
  const child = spawn(process.execPath, [join(__dirname, `${script}.js`), ...args.map(String)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const code = await new Promise((ok) => child.once("exit", ok));
  if (code !== 0) throw new Error(`bench/${script} exited with ${String(code)}`);
  return JSON.parse(out) as T;
}

/** The bare loop (bench/webhook-bare.ts) against the receiver for `seconds`: requests/s it reached. */
export async function bareLoop(rx: Receiver, seconds: number, inFlight: number): Promise<number> {
  await rx.reset();
  const { failed } = await runScript<{ failed: number }>("webhook-bare", [rx.url, seconds, inFlight]);
  if (failed > 0) throw new Error(`bare loop: ${failed} POSTs failed`);
  return rate(await rx.stats());
}

export async function post(url: string, key: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await request(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

/** POSTs `body()` to `url` as fast as `connections` clients can, `amount` times or for `duration` s. */
export async function flood(
  url: string,
  key: string,
  body: () => unknown,
  opts: { amount?: number; duration?: number; connections: number },
) {
  const result = await autocannon({
    url,
    method: "POST",
    connections: opts.connections,
    ...(opts.amount !== undefined && { amount: opts.amount }),
    ...(opts.duration !== undefined && { duration: opts.duration }),
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify(body()) }) }],
  });
  const bad = result.non2xx + result.errors + result.timeouts;
  if (bad > 0) throw new Error(`${bad} of ${result.requests.sent} POSTs to ${url} failed`);
  return { accepted: result["2xx"], rps: Math.round(result["2xx"] / (result.duration || 1)) };
}

/**
 * POSTs `body(sent)` to `url` at `perSecond` for `seconds` on a steady schedule (each request leaves
 * at its own time, not in bursts), `sent` being the moment it leaves; answers how many were
 * accepted, how fast, and how long the answers took.
 */
export async function paced(url: string, key: string, perSecond: number, seconds: number, body: (sent: number, i: number) => unknown) {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections: 64 });
  const answers: number[] = [];
  const sends: Promise<void>[] = [];
  const start = now();
  const total = perSecond * seconds;
  let failed = 0;
  for (let i = 0; i < total; i += 1) {
    const wait = start + (i * 1000) / perSecond - now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const sent = now();
    sends.push(
      pool
        .request({
          path: target.pathname,
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(body(sent, i)),
        })
        .then(async (res) => {
          await res.body.dump();
          if (res.statusCode === 201) answers.push(now() - sent);
          else failed += 1;
        }),
    );
  }
  await Promise.all(sends);
  const elapsed = (now() - start) / 1000;
  await pool.close();
  if (failed > 0) throw new Error(`${failed} of ${total} POSTs to ${url} failed`);
  return { accepted: answers.length, rps: Math.round(answers.length / elapsed), p50: quantile(answers, 0.5), p99: quantile(answers, 0.99) };
}

/** What a benchmark started, stopped in reverse order; `scope` stops what its body started. */
export class Teardown {
  private readonly steps: (() => Promise<void> | void)[] = [];

  add(step: () => Promise<void> | void): void {
    this.steps.push(step);
  }

  async scope<T>(body: () => Promise<T>): Promise<T> {
    const mark = this.steps.length;
    try {
      return await body();
    } finally {
      await this.unwind(mark);
    }
  }

  async unwind(mark = 0): Promise<void> {
    for (const step of this.steps.splice(mark).reverse()) await step();
  }
}

/**
 * A platform node with the embedded store (and the gateway, on a free port) on a fresh data
 * directory, on `nats` when given; resolves once its gateway answers. `env` is what the mode's
 * other nodes share (data directory, transporter, port).
 */
export async function storeNode(
  t: Teardown,
  name: string,
  common: Record<string, string>,
  services: string | undefined,
  nats?: NatsServer,
) {
  const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
  t.add(() => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const env = { ...common, DATA_DIR: dir, PORT: String(port), ...(nats && { TRANSPORTER: nats.url }) };
  const node = startNode(name, { ...env, ...(services && { SERVICES: services }) });
  // Profiled nodes (BENCH_PROF) write their profiles on SIGTERM.
  t.add(() => node.kill(process.env.BENCH_PROF ? "SIGTERM" : "SIGKILL"));
  await waitFor(`${name} to listen`, async () => (await fetch(`http://127.0.0.1:${port}/health`)).ok);
  return { dir, env, node, base: `http://127.0.0.1:${port}/v1` };
}

export async function natsFor(t: Teardown): Promise<NatsServer> {
  const nats = await startNats();
  t.add(() => nats.stop());
  return nats;
}

/** What the workflow benches give every server: no rate limit or run budget in the way, local receivers allowed. */
export const RUN_BENCH_ENV = {
  RATE_LIMIT_MAX: "10000000",
  RUN_STARTS_PER_MINUTE: "10000000",
  LOG_LEVEL: "warn",
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
};

export interface Server {
  pid: number;
  /** `http://127.0.0.1:<port>/v1` */
  base: string;
  /** The live admin key of the organization created for the bench. */
  admin: string;
  dir: string;
  /** SIGKILL (SIGTERM with BENCH_PROF), then the data directory removed. */
  stop(): Promise<void>;
}

/**
 * The whole platform in one process (`<dist>/bin/server.js`, its output on this one's) on a fresh
 * data directory with RUN_BENCH_ENV and `env` (profiled into `$BENCH_PROF/single` when set), and an
 * organization made by that build's own CLI (another build's would declare its own indexes in this
 * build's file); resolves once the server answers.
 */
export async function startServer(opts: { dist?: string; env?: Record<string, string>; what?: string } = {}): Promise<Server> {
  const dist = opts.dist ?? join(__dirname, "..");
  const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
  const port = await freePort();
  const prof = process.env.BENCH_PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROF}/single` } : {};
  const env = {
    ...process.env,
    ...RUN_BENCH_ENV,
    ...prof,
    ...opts.env,
    DATA_DIR: dir,
    PORT: String(port),
    NODE_ID: "single",
    HOST: "127.0.0.1",
  };
  const child = spawn(process.execPath, [join(dist, "bin/server.js")], { env, stdio: ["ignore", "inherit", "inherit"] });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null)
      await new Promise((exited) => {
        child.once("exit", exited);
        // A profiled server (BENCH_PROF) writes its profile on SIGTERM.
        child.kill(process.env.BENCH_PROF ? "SIGTERM" : "SIGKILL");
      });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const health = `http://127.0.0.1:${port}/health`;
    await waitFor(opts.what ?? "the server to listen", async () => (await fetch(health).catch(() => undefined))?.ok === true);
    const created = spawnSync(process.execPath, [join(dist, "bin/cli.js"), "orgs", "create", "--name", "Bench"], {
      env: { ...process.env, DATA_DIR: dir },
      encoding: "utf8",
    });
    const admin = (JSON.parse(created.stdout) as { api_keys: { key: string }[] }).api_keys[0].key;
    return { pid: child.pid as number, base: `http://127.0.0.1:${port}/v1`, admin, dir, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The `data` of a GET of the API. */
export async function getData(url: string, key: string): Promise<any> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  return ((await res.json()) as { data: unknown }).data;
}

/** How many nodes the registry behind `metricsUrl` (a node's METRICS_PORT) lists for `service`. */
async function endpoints(metricsUrl: string, service: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const label = `service="${service}"`;
  return text
    .split("\n")
    .filter((l) => l.startsWith("moleculer_registry_service_endpoints_total{") && l.includes(label))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

export interface Cluster {
  base: string;
  admin: string;
  /** The API node's, then each workflows node's. */
  pids: number[];
}

/**
 * nats-server, an API node (every service but workflows) and `workflowsNodes` workflows nodes on
 * one data directory, with an organization; resolves once the API node's registry lists every
 * workflows node (so its calls and events are balanced over all of them).
 */
export async function startCluster(t: Teardown, common: Record<string, string>, workflowsNodes = 2): Promise<Cluster> {
  const metricsPort = await freePort();
  const api = await storeNode(
    t,
    "api",
    { ...common, METRICS_PORT: String(metricsPort) },
    "gateway,auth,keys,orgs,events,webhooks",
    await natsFor(t),
  );
  // One metrics port: the API node's.
  const env: Record<string, string> = { ...api.env };
  delete env.METRICS_PORT;
  const pids = [api.node.child.pid as number];
  for (let i = 1; i <= workflowsNodes; i += 1) {
    const node = startNode(`workflows-${i}`, { ...env, SERVICES: "workflows" });
    t.add(() => node.kill("SIGKILL"));
    pids.push(node.child.pid as number);
  }
  const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: api.dir }).api_keys.find((k) => k.environment === "live")!.key;
  const metrics = `http://127.0.0.1:${metricsPort}/metrics`;
  await waitFor(
    `${workflowsNodes} workflows nodes`,
    async () => (await endpoints(metrics, "workflows").catch(() => 0)) >= workflowsNodes,
    60_000,
  );
  return { base: api.base, admin, pids };
}

/** The bare loop's runs, first and last, and their mean (what the ratios are to). */
export function bareLine(label: string, bares: number[], unit: string): number {
  const bare = Math.round(mean(bares));
  console.log(`${label}: ${bares.join(" (first), ")} (last) ${unit}; ratios are to their mean, ${bare}`);
  return bare;
}

/** The answer of GET /v1/api-keys/{id} as the platform gives it: what bench/core.ts's bare server and trivial alias send. */
export const API_KEY_BODY = {
  object: "api_key",
  id: "key_01jdx3v6f0m4k2c8r1n5q7w9ya",
  name: "bench",
  environment: "live",
  scopes: ["api-keys:read"],
  status: "active",
  prefix: "svc_live_ab12",
  last4: "wxyz",
  created_at: new Date().toISOString(),
  revoked_at: null,
  expires_at: null,
  last_used_at: null,
};
