/**
 * How fast a waiting run resumes when its event comes, with many waiting: BENCH_WAITING (10,000)
 * runs of a workflow wait for `pay.done` each with its own `data.order_id`, then events for them
 * are POSTed at a steady BENCH_RATE (50) per second for BENCH_SECONDS (6); in one process, then in a
 * cluster (API node and two workflows nodes over NATS, BENCH_MODES). Prints the p50/p99 from the
 * event's POST leaving the client to the request of the step after the wait arriving at a local
 * receiver (the event stored, found, the run resumed and its next step sent), the POSTs' own answer
 * times, and the platform processes' CPU per event (nats-server not counted).
 *
 *   npm run --silent build && node dist/bench/waits.js      (BENCH_WAITING=10000 BENCH_RATE=50 BENCH_SECONDS=6)
 */
import { cpuMs, flood, paced, post, quantile, Receiver, RUN_BENCH_ENV, startCluster, startServer, Teardown } from "./lib";
import { waitFor } from "../tools/procs";

const WAITING = Number(process.env.BENCH_WAITING ?? 10_000);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const MODES = (process.env.BENCH_MODES ?? "single,cluster").split(",");

const cpuOf = (pids: number[]) => pids.reduce((sum, pid) => sum + cpuMs(pid), 0);

async function measure(label: string, { base, admin, pids }: { base: string; admin: string; pids: number[] }, rx: Receiver): Promise<void> {
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
  console.log(`${label}: ${WAITING} runs waiting after ${((Date.now() - started) / 1000).toFixed(1)} s`);

  await rx.reset();
  const cpu0 = cpuOf(pids);
  // Orders spread over the waiting runs, each met once.
  const stride = Math.max(1, Math.floor(WAITING / (RATE * SECONDS)));
  const sent = await paced(`${base}/events`, admin, RATE, SECONDS, (at, i) => ({
    type: "pay.done",
    data: { order_id: `o-${(i * stride) % WAITING}`, sent: at },
  }));
  const stats = await rx.waitForUnique(sent.accepted, 120_000);
  const cpu = (cpuOf(pids) - cpu0) / sent.accepted;
  console.log(
    `${label}: resume with ${WAITING} waiting, ${RATE} events/s: event → next step p50 ${quantile(stats.latencies, 0.5).toFixed(1)} / p99 ${quantile(stats.latencies, 0.99).toFixed(1)} ms ` +
      `(POST /events answered p50 ${sent.p50.toFixed(1)} / p99 ${sent.p99.toFixed(1)} ms), CPU ${cpu.toFixed(2)} ms/event`,
  );
}

async function main(): Promise<void> {
  const rx = await Receiver.start();
  try {
    if (MODES.includes("single")) {
      const server = await startServer();
      try {
        await measure("single process", { base: server.base, admin: server.admin, pids: [server.pid] }, rx);
      } finally {
        await server.stop();
      }
    }
    if (MODES.includes("cluster")) {
      const t = new Teardown();
      try {
        await measure("cluster (api | 2 workflows nodes, NATS)", await startCluster(t, RUN_BENCH_ENV), rx);
      } finally {
        await t.unwind();
      }
    }
  } finally {
    rx.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
