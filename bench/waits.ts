/**
 * How fast a waiting run resumes when its event comes, with many waiting: BENCH_WAITING (10,000)
 * runs of a workflow wait for `pay.done` each with its own `data.order_id`, then events for them
 * are POSTed at a steady BENCH_RATE (50) per second for BENCH_SECONDS (6), in one process of this
 * checkout. Prints the p50/p99 from the event's POST leaving the client to the request of the step
 * after the wait arriving at a local receiver (the event stored, found, the run resumed and its next
 * step sent), the POSTs' own answer times, and the server's CPU per event.
 *
 *   npm run --silent build && node dist/bench/waits.js      (BENCH_WAITING=10000 BENCH_RATE=50 BENCH_SECONDS=6)
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, flood, paced, post, quantile, Receiver } from "./lib";
import { freePort, waitFor } from "../tools/procs";

const WAITING = Number(process.env.BENCH_WAITING ?? 10_000);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const COMMON = { RATE_LIMIT_MAX: "10000000", RUN_STARTS_PER_MINUTE: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };

async function main(): Promise<void> {
  const rx = await Receiver.start();
  const dir = mkdtempSync(join(tmpdir(), "wfp-waits-"));
  const port = await freePort();
  const env = { ...process.env, ...COMMON, DATA_DIR: dir, PORT: String(port), NODE_ID: "single", HOST: "127.0.0.1" };
  const root = join(__dirname, "..");
  const child = spawn(process.execPath, [join(root, "bin/server.js")], { env, stdio: ["ignore", "inherit", "inherit"] });
  const pid = child.pid as number;
  try {
    await waitFor("the server to listen", async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok === true);
    const created = spawnSync(process.execPath, [join(root, "bin/cli.js"), "orgs", "create", "--name", "Bench"], {
      env: { ...process.env, DATA_DIR: dir },
      encoding: "utf8",
    });
    const admin = (JSON.parse(created.stdout) as { api_keys: { key: string }[] }).api_keys[0].key;
    const base = `http://127.0.0.1:${port}/v1`;
    const wf = await post(`${base}/workflows`, admin, {
      name: "pay then ship",
      trigger: { type: "manual" },
      steps: [
        { id: "pay", type: "wait_for_event", event_type: "pay.done", match: { "data.order_id": "{{ input.order_id }}" } },
        {
          id: "ship",
          type: "http",
          method: "GET",
          url: `${rx.origin}/run?id={{ steps.pay.output.id }}&sent={{ steps.pay.output.data.sent }}`,
        },
      ],
    });
    if (wf.status !== 201) throw new Error(`workflow: ${JSON.stringify(wf.body)}`);
    const id = wf.body.data.id as string;

    let n = 0;
    const started = Date.now();
    await flood(`${base}/workflows/${id}/runs`, admin, () => ({ input: { order_id: `o-${n++}` } }), { amount: WAITING, connections: 32 });
    await waitFor(
      `${WAITING} runs waiting`,
      async () => {
        const res = await fetch(`${base}/workflows/${id}/runs?status=waiting&per_page=1`, {
          headers: { authorization: `Bearer ${admin}` },
        });
        return ((await res.json()) as { meta: { total: number } }).meta.total >= Math.min(WAITING, 10_000);
      },
      600_000,
    );
    console.log(`${WAITING} runs waiting after ${((Date.now() - started) / 1000).toFixed(1)} s`);

    await rx.reset();
    const cpu0 = cpuMs(pid);
    // Orders spread over the waiting runs, each met once.
    const stride = Math.max(1, Math.floor(WAITING / (RATE * SECONDS)));
    const sent = await paced(`${base}/events`, admin, RATE, SECONDS, (at, i) => ({
      type: "pay.done",
      data: { order_id: `o-${(i * stride) % WAITING}`, sent: at },
    }));
    const stats = await rx.waitForUnique(sent.accepted, 120_000);
    const cpu = (cpuMs(pid) - cpu0) / sent.accepted;
    console.log(
      `resume with ${WAITING} waiting, ${RATE} events/s: event → next step p50 ${quantile(stats.latencies, 0.5).toFixed(1)} / p99 ${quantile(stats.latencies, 0.99).toFixed(1)} ms ` +
        `(POST /events answered p50 ${sent.p50.toFixed(1)} / p99 ${sent.p99.toFixed(1)} ms), CPU ${cpu.toFixed(2)} ms/event`,
    );
  } finally {
    await new Promise((exited) => {
      child.once("exit", exited);
      child.kill("SIGKILL");
    });
    rx.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
