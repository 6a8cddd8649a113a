/**
 * Webhook delivery against a bare sign-and-POST loop, in one run, all to the same local receiver
 * (a process of its own that answers 200 at once):
 *   bare      — a loop that only signs and POSTs event bodies (keep-alive, 32 connections and 32 in
 *               flight, no pipelining: what one webhook's pool gets from a dispatcher); nothing stored,
 *               and the answer is read and dropped (the dispatcher also keeps what it sent and got
 *               for the delivery log, and counts the outcome)
 *   single    — the whole platform in one process (`npm start`)
 *   cluster   — the API node (gateway, auth, keys, orgs, events, webhooks) and two
 *               webhook-dispatcher nodes, over NATS, all on the same SQLite file
 * For each platform mode:
 *   drain     — deliveries/s: a backlog of BENCH_EVENTS events stored while no dispatcher ran,
 *               sent when one starts (every delivery stored, leased, signed, POSTed and logged)
 *   CPU       — each process's CPU µs per delivery (from /proc, all its threads) over the drain's
 *               middle (10 % to 90 % received), and the machine's idle share meanwhile
 *   @500/s    — p50/p99 from `POST /events` (a stamp in the event's data) to receipt, at 500 events/s
 *   saturated — events/s accepted and deliveries/s while clients emit as fast as they can
 * And the ceiling the embedded store sets on the single process's drain: the store work alone of
 * the same backlog, no HTTP (bench/delivery-store.ts), in a process of its own.
 *
 *   npm run bench:webhooks        (BENCH_SECONDS=10 BENCH_EVENTS=30000 BENCH_RATE=500; BENCH_DRAIN_ONLY=1: the drain alone)
 */
import { readFileSync } from "node:fs";
import { request } from "undici";
import { peakRssMiB, runCli, startNode, waitFor, type Proc } from "../tools/procs";
import {
  bareLine,
  bareLoop,
  cpuMs,
  flood,
  natsFor,
  now,
  paced,
  post,
  quantile,
  rate,
  Receiver,
  runScript,
  storeNode,
  Teardown,
} from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
/**
 * The backlog: 30,000 events (3–4 s of draining), so a freshly started node's first second (its code
 * not yet optimized; two such processes in the cluster) is not most of the figure, as it was at 10,000.
 */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 30_000);
const RATE = Number(process.env.BENCH_RATE ?? 500);
const IN_FLIGHT = 32;
const COMMON = { RATE_LIMIT_MAX: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };
const API_SERVICES = "gateway,auth,keys,orgs,events,webhooks";
/** BENCH_PROF=<dir>: CPU profiles of the single process and of the cluster's nodes, in <dir>/<node>. */
const PROF = process.env.BENCH_PROF;
/** BENCH_DRAIN_ONLY=1: the drain alone (no paced or saturated phase), e.g. to profile it. */
const DRAIN_ONLY = process.env.BENCH_DRAIN_ONLY === "1";
const profiled = (node: string): Record<string, string> => (PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${PROF}/${node}` } : {});

interface ModeFigures {
  name: string;
  drain: number;
  nodes: string[];
  /** CPU µs per delivery during the drain's middle (10 % to 90 % received): the receiver's, then each serving process's. */
  cpu: number[];
  /** The machine's idle share meanwhile (all cores). */
  idle: number;
  p50: number;
  p99: number;
  paced: number;
  lost: number;
  ingest: number;
  saturated: number;
  rssMiB: number[];
}

const emit = (base: string, key: string, opts: { amount?: number; duration?: number; connections: number }) =>
  flood(`${base}/events`, key, () => ({ type: "bench.test", data: { sent: now() } }), opts);

/** Idle and total jiffies of all cores, from /proc/stat. */
function machineIdle(): { idle: number; total: number } {
  const jiffies = readFileSync("/proc/stat", "utf8").split("\n")[0].split(/\s+/).slice(1).map(Number);
  return { idle: jiffies[3] + jiffies[4], total: jiffies.reduce((a, b) => a + b, 0) };
}

/**
 * Waits for the backlog to arrive, sampling the CPU time of `pids` meanwhile: answers the receiver's
 * figures and each process's CPU µs per delivery between 10 % and 90 % of the backlog received (so
 * neither a node's start nor the tail is counted).
 */
async function drainCpu(
  rx: Receiver,
  pids: number[],
): Promise<{ stats: Awaited<ReturnType<Receiver["stats"]>>; cpu: number[]; idle: number }> {
  const until = Date.now() + 300_000;
  type Sample = { unique: number; cpu: number[]; idle: { idle: number; total: number } };
  let from: Sample | undefined;
  let to: Sample | undefined;
  for (;;) {
    const { unique } = await rx.count();
    const sample = { unique, cpu: pids.map(cpuMs), idle: machineIdle() };
    if (!from && unique >= EVENTS * 0.1) from = sample;
    if (!to && unique >= EVENTS * 0.9) to = sample;
    if (unique >= EVENTS) break;
    if (Date.now() > until) throw new Error(`receiver: ${unique} of ${EVENTS} arrived`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const stats = await rx.stats();
  if (!from || !to || to.unique === from.unique) return { stats, cpu: pids.map(() => NaN), idle: NaN };
  const n = to.unique - from.unique;
  const idle = (to.idle.idle - from.idle.idle) / (to.idle.total - from.idle.total);
  return { stats, cpu: pids.map((_, i) => ((to.cpu[i] - from.cpu[i]) * 1000) / n), idle };
}

/**
 * One platform mode: `ingest` runs everything but the dispatcher; `dispatch()` starts what sends
 * (the full single process again, or a dispatcher node); `serving` are the processes to report.
 */
async function measure(
  name: string,
  nodes: string[],
  rx: Receiver,
  dir: string,
  base: string,
  dispatch: () => Promise<Proc[]>,
): Promise<ModeFigures> {
  const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: dir }).api_keys[0].key;
  await waitFor(
    `${base} to serve`,
    async () => (await request(`${base}/events?per_page=1`, { headers: { authorization: `Bearer ${admin}` } })).statusCode === 200,
  );
  const hook = await post(`${base}/webhooks`, admin, { url: rx.url, events: ["bench.test"] });
  if (hook.status !== 201) throw new Error(`webhook: ${JSON.stringify(hook.body)}`);

  // Drain: a backlog stored while no dispatcher runs.
  await emit(base, admin, { amount: EVENTS, connections: IN_FLIGHT });
  await rx.reset();
  const serving = await dispatch();
  const { stats: drained, cpu, idle } = await drainCpu(rx, [rx.child.pid!, ...serving.map((p) => p.child.pid!)]);
  const drain = rate(drained);
  const rssMiB = () => serving.map((p) => peakRssMiB(p.child.pid) ?? -1);
  if (DRAIN_ONLY)
    return { name, nodes, drain, cpu, idle, p50: NaN, p99: NaN, paced: 0, lost: 0, ingest: 0, saturated: 0, rssMiB: rssMiB() };

  // Latency at a steady rate.
  await rx.reset();
  const steady = await paced(`${base}/events`, admin, RATE, SECONDS, (sent) => ({ type: "bench.test", data: { sent } }));
  const pacedStats = await rx.waitForUnique(steady.accepted, 30_000).catch(async () => rx.stats());
  console.log(`${name}: POST /events at ${RATE}/s answered in p50 ${steady.p50.toFixed(1)} ms, p99 ${steady.p99.toFixed(1)} ms`);

  // Saturated: emit as fast as clients can; deliveries/s while that runs and drains.
  await rx.reset();
  const sat = await emit(base, admin, { duration: SECONDS, connections: IN_FLIGHT });
  const satStats = await rx.waitForUnique(sat.accepted, 300_000);

  return {
    name,
    nodes,
    drain,
    cpu,
    idle,
    p50: quantile(pacedStats.latencies, 0.5),
    p99: quantile(pacedStats.latencies, 0.99),
    paced: steady.rps,
    lost: Math.max(0, steady.accepted - pacedStats.unique),
    ingest: sat.rps,
    saturated: rate(satStats),
    rssMiB: rssMiB(),
  };
}

/** Deliveries/s of the store work alone (bench/delivery-store.ts). */
async function storeCeiling(events: number): Promise<number> {
  const { deliveries, ms } = await runScript<{ deliveries: number; ms: number }>("delivery-store", [events]);
  return Math.round((deliveries * 1000) / ms);
}

async function main(): Promise<void> {
  const t = new Teardown();
  const figures: ModeFigures[] = [];
  const bares: number[] = [];
  let ceiling = NaN;
  try {
    const rx = await Receiver.start();
    t.add(() => rx.stop());

    // The bare loop runs first (after a warm-up) and again last: the machine is shared and noisy.
    await bareLoop(rx, 2, IN_FLIGHT);
    bares.push(await bareLoop(rx, SECONDS, IN_FLIGHT));
    ceiling = await storeCeiling(EVENTS);

    // Single process: first without the dispatcher (the backlog), then the whole platform.
    await t.scope(async () => {
      const { dir, env, node: ingest, base } = await storeNode(t, "ingest", COMMON, API_SERVICES);
      figures.push(
        await measure("single process", ["single"], rx, dir, base, async () => {
          await ingest.kill("SIGTERM");
          const node = startNode("single", { ...env, ...profiled("single") });
          t.add(() => node.kill(PROF ? "SIGTERM" : "SIGKILL"));
          return [node];
        }),
      );
    });

    // Cluster: the API node, then a dispatcher node once the backlog is stored.
    await t.scope(async () => {
      const {
        dir,
        env,
        node: apiNode,
        base,
      } = await storeNode(t, "api", { ...COMMON, ...profiled("api") }, API_SERVICES, await natsFor(t));
      figures.push(
        await measure("cluster (api | 2 dispatchers, NATS)", ["api", "d1", "d2"], rx, dir, base, async () => {
          const dispatchers = ["d1", "d2"].map((name) => startNode(name, { ...env, SERVICES: "webhook-dispatcher", ...profiled(name) }));
          for (const d of dispatchers) t.add(() => d.kill(PROF ? "SIGTERM" : "SIGKILL"));
          return [apiNode, ...dispatchers];
        }),
      );
    });

    bares.push(await bareLoop(rx, SECONDS, IN_FLIGHT));
  } finally {
    await t.unwind();
  }

  console.log(
    `\nWebhook delivery to one local receiver; ${IN_FLIGHT} in flight per webhook; runs of ${SECONDS}s; backlog ${EVENTS} events`,
  );
  const bare = bareLine("bare sign-and-POST loop", bares, "deliveries/s");
  console.log(`store work alone, no HTTP (the single process's ceiling): ${ceiling} deliveries/s, ${(ceiling / bare).toFixed(2)}x`);
  console.log(
    "mode                               drain/s  ratio   p50 ms  p99 ms @ events/s  lost   saturated: events/s  deliveries/s  ratio   peak RSS MiB",
  );
  for (const f of figures) {
    console.log(
      `${f.name.padEnd(34)} ${String(f.drain).padStart(7)}  ${(f.drain / bare).toFixed(2)}x ${f.p50.toFixed(1).padStart(7)} ${f.p99.toFixed(1).padStart(7)} @ ${String(f.paced).padStart(8)} ${String(f.lost).padStart(5)}  ${String(f.ingest).padStart(19)}  ${String(f.saturated).padStart(12)}  ${(f.saturated / bare).toFixed(2)}x  ${f.rssMiB.join("+").padStart(13)}`,
    );
  }
  const single = figures[0].drain;
  console.log(
    `\ndrain against the single process's in this run: ${figures
      .slice(1)
      .map((f) => `${f.name} ${(f.drain / single).toFixed(2)}x`)
      .join(", ")}`,
  );
  console.log("\nCPU per delivery during the drain (10 % to 90 % of the backlog received), µs:");
  for (const f of figures) {
    const parts = ["receiver", ...f.nodes].map((n, i) => `${n} ${f.cpu[i].toFixed(0)}`);
    console.log(
      `${f.name.padEnd(34)} ${parts.join(", ")}; platform ${f.cpu
        .slice(1)
        .reduce((a, b) => a + b, 0)
        .toFixed(0)}; machine ${(100 * f.idle).toFixed(0)} % idle`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
