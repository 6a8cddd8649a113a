/**
 * Workflow runs of a one-step workflow (an `http` GET to a local receiver, a process of its own),
 * against a bare loop that only makes such requests, in one run:
 *   single    — the whole platform in one process
 *   cluster   — the API node (gateway, auth, keys, orgs, events, webhooks) and one
 *               workflows node, over NATS
 * For each mode:
 *   saturated — runs started/s while clients start them as fast as they can, and runs executed/s
 *   @rate     — p50/p99 from `POST /workflows/{id}/runs` leaving the client to the step's request
 *               arriving, and of the runs' own created→finished times, at a steady BENCH_RATE runs/s
 *
 *   npm run bench:runs        (BENCH_SECONDS=10 BENCH_RATE=100)
 */
import { request } from "undici";
import { peakRssMiB, runCli, startNode, waitFor, type Proc } from "../tools/procs";
import { bareLine, bareLoop, flood, natsFor, paced, post, quantile, rate, Receiver, storeNode, Teardown } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const CLIENTS = 32;
const COMMON = { RATE_LIMIT_MAX: "10000000", RUN_STARTS_PER_MINUTE: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };

interface ModeFigures {
  name: string;
  started: number;
  executed: number;
  p50: number;
  p99: number;
  runP50: number;
  runP99: number;
  pacedRps: number;
  rssMiB: number[];
}

async function measure(name: string, rx: Receiver, dir: string, base: string, serving: Proc[]): Promise<ModeFigures> {
  const admin = runCli(["orgs", "create", "--name", "Bench"], { DATA_DIR: dir }).api_keys[0].key;
  await waitFor(
    `${base} to serve`,
    async () => (await request(`${base}/workflows?per_page=1`, { headers: { authorization: `Bearer ${admin}` } })).statusCode === 200,
  );
  const wf = await post(`${base}/workflows`, admin, {
    name: "bench",
    trigger: { type: "manual" },
    steps: [{ id: "call", type: "http", method: "GET", url: `${rx.origin}/run?id={{input.n}}&sent={{input.sent}}` }],
  });
  if (wf.status !== 201) throw new Error(`workflow: ${JSON.stringify(wf.body)}`);
  const runsUrl = `${base}/workflows/${wf.body.data.id}/runs`;
  let n = 0;

  // Saturated: start runs as fast as clients can; then every one of them executes.
  await flood(runsUrl, admin, () => ({ input: { n: n++, sent: 0 } }), { duration: 2, connections: CLIENTS });
  await rx.waitForUnique(n, 120_000);
  await rx.reset();
  const before = n;
  const sat = await flood(runsUrl, admin, () => ({ input: { n: n++, sent: 0 } }), { duration: SECONDS, connections: CLIENTS });
  const executed = await rx.waitForUnique(n - before, 300_000);

  // Steady rate: latencies.
  await rx.reset();
  const steady = await paced(runsUrl, admin, RATE, SECONDS, (sent) => ({ input: { n: n++, sent } }));
  const arrived = await rx.waitForUnique(steady.accepted, 60_000);
  // The runs' own times (created_at → finished_at, ms resolution): the newest pages.
  const durations: number[] = [];
  for (let page = 1; page <= Math.ceil(steady.accepted / 100); page += 1) {
    const res = await request(`${runsUrl}?per_page=100&page=${page}`, { headers: { authorization: `Bearer ${admin}` } });
    const body = (await res.body.json()) as { data: { created_at: string; finished_at: string | null; status: string }[] };
    for (const r of body.data) if (r.finished_at) durations.push(Date.parse(r.finished_at) - Date.parse(r.created_at));
  }
  return {
    name,
    started: sat.rps,
    executed: rate(executed),
    p50: quantile(arrived.latencies, 0.5),
    p99: quantile(arrived.latencies, 0.99),
    runP50: quantile(durations, 0.5),
    runP99: quantile(durations, 0.99),
    pacedRps: steady.rps,
    rssMiB: serving.map((p) => peakRssMiB(p.child.pid) ?? -1),
  };
}

async function main(): Promise<void> {
  const t = new Teardown();
  const figures: ModeFigures[] = [];
  const bares: number[] = [];
  try {
    const rx = await Receiver.start();
    t.add(() => rx.stop());
    await bareLoop(rx, 2, CLIENTS);
    bares.push(await bareLoop(rx, SECONDS, CLIENTS));

    await t.scope(async () => {
      const { dir, node, base } = await storeNode(t, "single", COMMON, undefined);
      figures.push(await measure("single process", rx, dir, base, [node]));
    });

    await t.scope(async () => {
      const {
        dir,
        env,
        node: apiNode,
        base,
      } = await storeNode(t, "api", COMMON, "gateway,auth,keys,orgs,events,webhooks", await natsFor(t));
      const workflowsNode = startNode("workflows", { ...env, SERVICES: "workflows" });
      t.add(() => workflowsNode.kill("SIGKILL"));
      figures.push(await measure("cluster (api | workflows, NATS)", rx, dir, base, [apiNode, workflowsNode]));
    });
    bares.push(await bareLoop(rx, SECONDS, CLIENTS));
  } finally {
    await t.unwind();
  }

  console.log(`\nOne-step workflow runs (an http GET to a local receiver); runs of ${SECONDS}s; ${CLIENTS} clients when saturated`);
  const bare = bareLine("bare HTTP loop", bares, "requests/s");
  console.log(
    `mode                               started/s  executed/s  ratio   start→step p50/p99 ms   run p50/p99 ms @ runs/s   peak RSS MiB`,
  );
  for (const f of figures) {
    console.log(
      `${f.name.padEnd(34)} ${String(f.started).padStart(9)} ${String(f.executed).padStart(11)}  ${(f.executed / bare).toFixed(2)}x ${f.p50.toFixed(1).padStart(10)} / ${f.p99.toFixed(1).padEnd(8)} ${String(f.runP50).padStart(8)} / ${String(f.runP99).padEnd(6)} @ ${String(f.pacedRps).padStart(5)} ${f.rssMiB.join("+").padStart(14)}`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
