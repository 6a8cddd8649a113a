/**
 * Webhook delivery against a bare sign-and-POST loop, in one run, all to the same local receiver
 * (a process of its own that answers 200 at once):
 *   bare      — a loop that only signs and POSTs event bodies (keep-alive, 32 in flight: what one
 *               webhook gets from a dispatcher); nothing stored
 *   single    — the whole platform in one process (`npm start`)
 *   cluster   — the API node (store, gateway, auth, keys, orgs, events, webhooks) and one
 *               webhook-dispatcher node, over NATS
 * For each platform mode:
 *   drain     — deliveries/s: a backlog of BENCH_EVENTS events stored while no dispatcher ran,
 *               sent when one starts (every delivery stored, leased, signed, POSTed and logged)
 *   @500/s    — p50/p99 from `POST /events` (a stamp in the event's data) to receipt, at 500 events/s
 *   saturated — events/s accepted and deliveries/s while clients emit as fast as they can
 *
 *   npm run bench:webhooks        (BENCH_SECONDS=10 BENCH_EVENTS=10000 BENCH_RATE=500)
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { Pool, request } from "undici";
import { freePort, peakRssMiB, runCli, startNats, startNode, waitFor, type Proc } from "../tools/procs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000);
const RATE = Number(process.env.BENCH_RATE ?? 500);
const IN_FLIGHT = 32;
const COMMON = { RATE_LIMIT_MAX: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };
const API_SERVICES = "store,gateway,auth,keys,orgs,events,webhooks";

interface Stats {
  count: number;
  unique: number;
  first: number;
  last: number;
  latencies: number[];
}

/** The receiver process and its IPC questions. */
class Receiver {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    const port = await freePort();
    const child = fork(join(__dirname, "webhook-receiver.js"), [String(port)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    await new Promise((ok) => child.once("message", ok));
    return new Receiver(child, `http://127.0.0.1:${port}/hook`);
  }

  private ask<T>(msg: string): Promise<T> {
    return new Promise((ok) => {
      this.child.once("message", (m) => ok(m as T));
      this.child.send(msg);
    });
  }

  reset = () => this.ask<unknown>("reset");
  stats = () => this.ask<Stats>("stats");

  async waitForUnique(n: number, timeoutMs: number): Promise<Stats> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const s = await this.stats();
      if (s.unique >= n) return s;
      if (Date.now() > until) throw new Error(`receiver: ${s.unique} of ${n} events arrived within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

const rate = (s: Stats): number => (s.count > 1 ? Math.round(((s.count - 1) * 1000) / (s.last - s.first)) : 0);
const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;
const now = (): number => performance.timeOrigin + performance.now();

async function post(url: string, key: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await request(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

interface ModeFigures {
  name: string;
  drain: number;
  p50: number;
  p99: number;
  paced: number;
  lost: number;
  ingest: number;
  saturated: number;
  rssMiB: number[];
}

/** Emits events through the gateway; `amount` events or `duration` seconds, optionally paced. */
async function emit(base: string, key: string, opts: { amount?: number; duration?: number; connections: number }) {
  const result = await autocannon({
    url: `${base}/events`,
    method: "POST",
    connections: opts.connections,
    ...(opts.amount !== undefined && { amount: opts.amount }),
    ...(opts.duration !== undefined && { duration: opts.duration }),
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify({ type: "bench.test", data: { sent: now() } }) }) }],
  });
  const bad = result.non2xx + result.errors + result.timeouts;
  if (bad > 0) throw new Error(`${bad} of ${result.requests.sent} POST /events failed`);
  return { accepted: result["2xx"], rps: Math.round(result["2xx"] / (result.duration || 1)) };
}

/**
 * Emits RATE events/s for SECONDS on a steady schedule (each request leaves at its own time, not in
 * bursts), stamping each with the moment it is sent; answers how many were accepted and how fast.
 */
async function pacedEmit(base: string, key: string) {
  const url = new URL(`${base}/events`);
  const pool = new Pool(url.origin, { connections: 64 });
  const answers: number[] = [];
  const sends: Promise<void>[] = [];
  const start = now();
  const total = RATE * SECONDS;
  let failed = 0;
  for (let i = 0; i < total; i += 1) {
    const at = start + (i * 1000) / RATE;
    const wait = at - now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const sent = now();
    sends.push(
      pool
        .request({
          path: url.pathname,
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ type: "bench.test", data: { sent } }),
        })
        .then(async (res) => {
          await res.body.dump();
          if (res.statusCode === 201) answers.push(now() - sent);
          else failed += 1;
        }),
    );
  }
  await Promise.all(sends);
  const seconds = (now() - start) / 1000;
  await pool.close();
  if (failed > 0) throw new Error(`${failed} of ${total} POST /events failed`);
  return { accepted: answers.length, rps: Math.round(answers.length / seconds), p50: quantile(answers, 0.5), p99: quantile(answers, 0.99) };
}

/**
 * One platform mode: `ingest` runs everything but the dispatcher; `dispatch()` starts what sends
 * (the full single process again, or a dispatcher node); `serving` are the processes to report.
 */
async function measure(
  name: string,
  rx: Receiver,
  dir: string,
  base: string,
  dispatch: () => Promise<Proc[]>,
): Promise<ModeFigures> {
  const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: dir }).api_keys[0].key;
  await waitFor(`${base} to serve`, async () => (await request(`${base}/events?per_page=1`, { headers: { authorization: `Bearer ${admin}` } })).statusCode === 200);
  const hook = await post(`${base}/webhooks`, admin, { url: rx.url, events: ["bench.test"] });
  if (hook.status !== 201) throw new Error(`webhook: ${JSON.stringify(hook.body)}`);

  // Drain: a backlog stored while no dispatcher runs.
  await emit(base, admin, { amount: EVENTS, connections: IN_FLIGHT });
  await rx.reset();
  const serving = await dispatch();
  const drained = await rx.waitForUnique(EVENTS, 300_000);
  const drain = rate(drained);

  // Latency at a steady rate.
  await rx.reset();
  const paced = await pacedEmit(base, admin);
  const pacedStats = await rx.waitForUnique(paced.accepted, 30_000).catch(async () => rx.stats());
  console.log(`${name}: POST /events at ${RATE}/s answered in p50 ${paced.p50.toFixed(1)} ms, p99 ${paced.p99.toFixed(1)} ms`);

  // Saturated: emit as fast as clients can; deliveries/s while that runs and drains.
  await rx.reset();
  const sat = await emit(base, admin, { duration: SECONDS, connections: IN_FLIGHT });
  const satStats = await rx.waitForUnique(sat.accepted, 300_000);

  return {
    name,
    drain,
    p50: quantile(pacedStats.latencies, 0.5),
    p99: quantile(pacedStats.latencies, 0.99),
    paced: paced.rps,
    lost: Math.max(0, paced.accepted - pacedStats.unique),
    ingest: sat.rps,
    saturated: rate(satStats),
    rssMiB: serving.map((p) => peakRssMiB(p.child.pid) ?? -1),
  };
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const figures: ModeFigures[] = [];
  const bares: number[] = [];
  try {
    const rx = await Receiver.start();
    cleanups.push(() => void rx.child.kill("SIGKILL"));

    // The bare loop runs first (after a warm-up) and again last: the machine is shared and noisy.
    const bareRun = async (seconds: number): Promise<number> => {
      await rx.reset();
      const child = spawn(process.execPath, [join(__dirname, "webhook-bare.js"), rx.url, String(seconds), String(IN_FLIGHT)], { stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      await new Promise((ok) => child.once("exit", ok));
      const { failed } = JSON.parse(out) as { failed: number };
      if (failed > 0) throw new Error(`bare loop: ${failed} POSTs failed`);
      return rate(await rx.stats());
    };
    await bareRun(2);
    bares.push(await bareRun(SECONDS));

    // Each mode stops its processes before the next one starts.
    const stopMode = async (mark: number) => {
      for (const c of cleanups.splice(mark).reverse()) await c();
    };

    // Single process: first without the dispatcher (the backlog), then the whole platform.
    {
      const mark = cleanups.length;
      const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const port = await freePort();
      const env = { ...COMMON, DATA_DIR: dir, PORT: String(port) };
      const ingest = startNode("ingest", { ...env, SERVICES: API_SERVICES });
      cleanups.push(() => ingest.kill("SIGKILL"));
      await waitFor("the store socket", () => existsSync(join(dir, "store.sock")));
      const base = `http://127.0.0.1:${port}/v1`;
      figures.push(
        await measure("single process", rx, dir, base, async () => {
          await ingest.kill("SIGTERM");
          // BENCH_PROF=<dir> writes a CPU profile of the single process there.
          const node = startNode("single", { ...env, ...(process.env.BENCH_PROF && { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROF}` }) });
          cleanups.push(() => node.kill(process.env.BENCH_PROF ? "SIGTERM" : "SIGKILL"));
          return [node];
        }),
      );
      await stopMode(mark);
    }

    // Cluster: the API node, then a dispatcher node once the backlog is stored.
    {
      const mark = cleanups.length;
      const nats = await startNats();
      cleanups.push(() => nats.stop());
      const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const port = await freePort();
      const env = { ...COMMON, DATA_DIR: dir, TRANSPORTER: nats.url };
      const apiNode = startNode("api", { ...env, SERVICES: API_SERVICES, PORT: String(port) });
      cleanups.push(() => apiNode.kill("SIGKILL"));
      await waitFor("the store socket", () => existsSync(join(dir, "store.sock")));
      figures.push(
        await measure("cluster (api | dispatcher, NATS)", rx, dir, `http://127.0.0.1:${port}/v1`, async () => {
          const dispatcher = startNode("dispatcher", { ...env, SERVICES: "webhook-dispatcher" });
          cleanups.push(() => dispatcher.kill("SIGKILL"));
          return [apiNode, dispatcher];
        }),
      );
      await stopMode(mark);
    }
    bares.push(await bareRun(SECONDS));
  } finally {
    for (const c of cleanups.reverse()) await c();
  }

  console.log(`\nWebhook delivery to one local receiver; ${IN_FLIGHT} in flight per webhook; runs of ${SECONDS}s; backlog ${EVENTS} events`);
  const bare = Math.round(bares.reduce((a, b) => a + b, 0) / bares.length);
  console.log(`bare sign-and-POST loop: ${bares.join(" (first), ")} (last) deliveries/s; ratios are to their mean, ${bare}`);
  console.log("mode                               drain/s  ratio   p50 ms  p99 ms @ events/s  lost   saturated: events/s  deliveries/s  ratio   peak RSS MiB");
  for (const f of figures) {
    console.log(
      `${f.name.padEnd(34)} ${String(f.drain).padStart(7)}  ${(f.drain / bare).toFixed(2)}x ${f.p50.toFixed(1).padStart(7)} ${f.p99.toFixed(1).padStart(7)} @ ${String(f.paced).padStart(8)} ${String(f.lost).padStart(5)}  ${String(f.ingest).padStart(19)}  ${String(f.saturated).padStart(12)}  ${(f.saturated / bare).toFixed(2)}x  ${f.rssMiB.join("+").padStart(13)}`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
