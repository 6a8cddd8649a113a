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
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { freePort, peakRssMiB, runCli, startNats, startNode, waitFor, type Proc } from "../tools/procs";
import { bareLoop, flood, now, paced, post, quantile, rate, Receiver } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000);
const RATE = Number(process.env.BENCH_RATE ?? 500);
const IN_FLIGHT = 32;
const COMMON = { RATE_LIMIT_MAX: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };
const API_SERVICES = "store,gateway,auth,keys,orgs,events,webhooks";

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

const emit = (base: string, key: string, opts: { amount?: number; duration?: number; connections: number }) =>
  flood(`${base}/events`, key, () => ({ type: "bench.test", data: { sent: now() } }), opts);

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
  const steady = await paced(`${base}/events`, admin, RATE, SECONDS, (sent) => ({ type: "bench.test", data: { sent } }));
  const pacedStats = await rx.waitForUnique(steady.accepted, 30_000).catch(async () => rx.stats());
  console.log(`${name}: POST /events at ${RATE}/s answered in p50 ${steady.p50.toFixed(1)} ms, p99 ${steady.p99.toFixed(1)} ms`);

  // Saturated: emit as fast as clients can; deliveries/s while that runs and drains.
  await rx.reset();
  const sat = await emit(base, admin, { duration: SECONDS, connections: IN_FLIGHT });
  const satStats = await rx.waitForUnique(sat.accepted, 300_000);

  return {
    name,
    drain,
    p50: quantile(pacedStats.latencies, 0.5),
    p99: quantile(pacedStats.latencies, 0.99),
    paced: steady.rps,
    lost: Math.max(0, steady.accepted - pacedStats.unique),
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
    cleanups.push(() => rx.stop());

    // The bare loop runs first (after a warm-up) and again last: the machine is shared and noisy.
    await bareLoop(rx, 2, IN_FLIGHT);
    bares.push(await bareLoop(rx, SECONDS, IN_FLIGHT));

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
    bares.push(await bareLoop(rx, SECONDS, IN_FLIGHT));
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
