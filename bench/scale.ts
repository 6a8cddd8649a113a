/**
 * What a request costs as the data grows: one organization with one `*` webhook, its event log
 * grown to each size of BENCH_SIZES (every event with its delivery, settled; spread over 30 days),
 * and at each size the whole platform in one process (`npm start`) is started on it and measured:
 *   start     — ms from spawning the process to the first answered `GET /events` (a restart)
 *   stop      — ms from SIGTERM to the process's exit
 *   RSS       — the process's peak resident memory after every read below, MiB
 *   p50/p99   — of BENCH_READS sequential requests to each list and analytics endpoint
 *   /health   — p99 while a client reads those endpoints in turn, in a loop
 * Each figure is also printed as a ratio to the first size's, measured in the same run.
 *
 *   npm run bench:scale        (BENCH_SIZES=10000,100000,1000000 BENCH_READS=200)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { freePort, peakRssMiB, runCli, startNode, waitFor, type Proc } from "../tools/procs";
import { post, quantile, Receiver, runScript, Teardown } from "./lib";

const SIZES = (process.env.BENCH_SIZES ?? "10000,100000,1000000").split(",").map(Number);
const READS = Number(process.env.BENCH_READS ?? 200);
const DAYS = 30;

interface Figures {
  size: number;
  seedMs: number;
  startMs: number;
  stopMs: number;
  rssMiB: number;
  reads: Map<string, { p50: number; p99: number }>;
  health: { p50: number; p99: number; max: number };
}

async function get(url: string, key?: string): Promise<{ status: number; ms: number; body: any }> {
  const started = performance.now();
  const res = await request(url, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  const body = await res.body.json();
  return { status: res.statusCode, ms: performance.now() - started, body };
}

async function timed(url: string, key: string, n: number): Promise<{ p50: number; p99: number }> {
  const ms: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const res = await get(url, key);
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${JSON.stringify(res.body)}`);
    ms.push(res.ms);
  }
  return { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) };
}

async function main(): Promise<void> {
  const t = new Teardown();
  const results: Figures[] = [];
  try {
    const rx = await Receiver.start();
    t.add(() => rx.stop());
    const dir = mkdtempSync(join(tmpdir(), "wfp-scale-"));
    t.add(() => rmSync(dir, { recursive: true, force: true }));
    const port = await freePort();
    const env = { DATA_DIR: dir, PORT: String(port), RATE_LIMIT_MAX: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };
    const origin = `http://127.0.0.1:${port}`;
    const base = `${origin}/v1`;
    const cli = runCli(["orgs", "create", "--name", "Scale"], { DATA_DIR: dir });
    const admin = cli.api_keys.find((k) => k.environment === "live")!.key;

    let node: Proc | undefined;
    const start = async () => {
      const started = performance.now();
      node = startNode("platform", env);
      t.add(() => node!.kill("SIGKILL"));
      await waitFor("the first answered list", async () => (await get(`${base}/events?per_page=20`, admin)).status === 200, 120_000);
      return performance.now() - started;
    };
    const stop = async () => {
      const started = performance.now();
      await node!.kill("SIGTERM");
      return performance.now() - started;
    };

    await start();
    const hook = await post(`${base}/webhooks`, admin, { url: rx.url, events: ["*"] });
    if (hook.status !== 201) throw new Error(`webhook: ${JSON.stringify(hook.body)}`);
    await stop();

    let stored = 0;
    for (const size of SIZES) {
      const seeded = await runScript<{ events: number; ms: number }>("seed", [dir, cli.org.id, hook.body.data.id, size - stored, DAYS]);
      stored = size;
      const startMs = await start();
      const first = (await get(`${base}/events?per_page=1`, admin)).body.data[0].id as string;
      const day = new Date(Date.now() - 86_400_000).toISOString();
      const month = new Date(Date.now() - DAYS * 86_400_000).toISOString();
      const endpoints: [string, string][] = [
        ["GET /events", "/events?per_page=20"],
        ["GET /events?type=", "/events?type=order.paid&per_page=20"],
        ["GET /events/{id}", `/events/${first}`],
        ["GET /webhooks/{id}/deliveries", `/webhooks/${hook.body.data.id}/deliveries?per_page=20`],
        ["GET /analytics/webhooks 24 h", `/analytics/webhooks?from=${day}`],
        ["GET /analytics/webhooks 30 d", `/analytics/webhooks?from=${month}`],
        ["GET /analytics/workflows 24 h", `/analytics/workflows?from=${day}`],
        ["GET /analytics/workflows 30 d", `/analytics/workflows?from=${month}`],
        ["GET /analytics/usage 24 h", `/analytics/usage?from=${day}`],
        ["GET /analytics/usage 30 d", `/analytics/usage?from=${month}&granularity=day`],
      ];
      const reads = new Map<string, { p50: number; p99: number }>();
      for (const [name, path] of endpoints) {
        await timed(`${base}${path}`, admin, 5);
        reads.set(name, await timed(`${base}${path}`, admin, READS));
      }
      // /health while a client reads every endpoint in turn, in a loop.
      let reading = true;
      const readers = [
        (async () => {
          for (let i = 0; reading; i += 1) await get(`${base}${endpoints[i % endpoints.length][1]}`, admin);
        })(),
      ];
      const health: number[] = [];
      for (let i = 0; i < READS; i += 1) health.push((await get(`${origin}/health`)).ms);
      reading = false;
      await Promise.all(readers);
      const rssMiB = peakRssMiB(node!.child.pid) ?? NaN;
      const stopMs = await stop();
      results.push({
        size,
        seedMs: seeded.ms,
        startMs,
        stopMs,
        rssMiB,
        reads,
        health: { p50: quantile(health, 0.5), p99: quantile(health, 0.99), max: Math.max(...health) },
      });
      console.log(
        `${size} events: seeded in ${(seeded.ms / 1000).toFixed(1)} s; start ${startMs.toFixed(0)} ms, stop ${stopMs.toFixed(0)} ms, RSS ${rssMiB} MiB`,
      );
    }
  } finally {
    await t.unwind();
  }

  const [firstSize] = results;
  const cell = (v: number, ref: number) => `${v.toFixed(1).padStart(8)} ${`(${(v / ref).toFixed(1)}x)`.padStart(8)}`;
  console.log(
    `\nOne tenant, one '*' webhook; every event has its delivery; ${READS} sequential reads per figure; ratios to ${firstSize.size} events`,
  );
  console.log(`${"".padEnd(40)}${results.map((r) => `${String(r.size).padStart(17)}`).join("")}`);
  const line = (label: string, pick: (r: Figures) => number) =>
    console.log(`${label.padEnd(40)}${results.map((r) => cell(pick(r), pick(firstSize))).join("")}`);
  line("start to first list, ms", (r) => r.startMs);
  line("stop, ms", (r) => r.stopMs);
  line("peak RSS, MiB", (r) => r.rssMiB);
  for (const name of firstSize.reads.keys()) line(`${name} p99 ms`, (r) => r.reads.get(name)!.p99);
  line("/health p99 ms, under reads", (r) => r.health.p99);
  line("/health max ms, under reads", (r) => r.health.max);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
