/**
 * A `map` step's children: one run of a workflow whose `map` goes over BENCH_ITEMS (1,000) items at
 * BENCH_CONCURRENCY (50) children at once, each child one `set` step (inline, and the same step as a
 * saved workflow named by `workflow_id`), against the baseline of as many plain runs of that
 * one-step workflow started by 32 clients; in one process, then in a cluster (API node and two
 * workflows nodes over NATS). From the runs' own timestamps:
 *   started/s  — children begun (their step started) per second, first to last
 *   finished/s — children ended per second, from the first one begun to the last one ended (for
 *                the baseline: its runs, the same way); the ratio is to the baseline's
 *   CPU/child  — the platform processes' CPU (from /proc, all threads; nats-server not counted) over
 *                the map, per child; the ratio is to the baseline's CPU per run
 *
 *   npm run bench:map      (BENCH_ITEMS=1000 BENCH_CONCURRENCY=50 BENCH_MODES=single,cluster)
 */
import { cpuMs, flood, getData, post, RUN_BENCH_ENV, startCluster, startServer, Teardown } from "./lib";
import { waitFor } from "../tools/procs";

const ITEMS = Number(process.env.BENCH_ITEMS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 50);
const MODES = (process.env.BENCH_MODES ?? "single,cluster").split(",");

const STEP = { id: "square", type: "set", output: { n: "{{ input.item }}", square: "{{ input.item * input.item }}" } };

interface Target {
  base: string;
  admin: string;
  pids: number[];
}

interface Figures {
  startedPerS: number;
  finishedPerS: number;
  cpuMs: number;
  wallMs: number;
}

const cpuOf = (pids: number[]) => pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
const ms = (iso: string) => Date.parse(iso);

/** Every run a list answers, 100 at a time along its cursor. */
async function every(url: string, key: string): Promise<Timed[]> {
  const runs = [];
  let after = "";
  for (;;) {
    const page = (await getData(`${url}&limit=100${after && `&starting_after=${after}`}`, key)) as any[];
    runs.push(...page);
    if (page.length < 100) return runs;
    after = page[page.length - 1].id as string;
  }
}

interface Timed {
  id: string;
  steps: { started_at: string | null }[];
  finished_at: string | null;
}

/** Rates from the runs' timestamps: first step begun, first to last; and first begun to last ended. */
function rates(runs: Timed[], cpu: number): Figures {
  const created = runs.map((r) => ms(r.steps[0].started_at!));
  const finished = runs.map((r) => ms(r.finished_at!));
  const first = Math.min(...created);
  const wallMs = Math.max(...finished) - first;
  return {
    startedPerS: Math.round(((runs.length - 1) * 1000) / Math.max(1, Math.max(...created) - first)),
    finishedPerS: Math.round((runs.length * 1000) / Math.max(1, wallMs)),
    cpuMs: cpu / runs.length,
    wallMs,
  };
}

async function create(t: Target, body: unknown): Promise<string> {
  const res = await post(`${t.base}/workflows`, t.admin, body);
  if (res.status !== 201) throw new Error(`workflow: ${JSON.stringify(res.body)}`);
  return res.body.data.id as string;
}

/** `count` plain runs of the one-step workflow, started by 32 clients, until all have ended. */
async function plainRuns(t: Target, leaf: string, count: number): Promise<Figures> {
  const url = `${t.base}/workflows/${leaf}/runs`;
  const mine = `${t.base}/runs?workflow_id=${leaf}`;
  const since = new Date().toISOString();
  const cpu0 = cpuOf(t.pids);
  let n = 0;
  await flood(url, t.admin, () => ({ input: { item: n++ } }), { amount: count, connections: 32 });
  const ended = async () =>
    (
      (await (
        await fetch(`${mine}&status=succeeded&created_after=${since}&per_page=1`, { headers: { authorization: `Bearer ${t.admin}` } })
      ).json()) as any
    ).meta.total as number;
  await waitFor(`${count} runs to end`, async () => (await ended()) >= count, 300_000);
  const cpu = cpuOf(t.pids) - cpu0;
  return rates(await every(`${mine}&created_after=${since}`, t.admin), cpu);
}

/** One run whose map goes over `items` items: its children's figures. */
async function mapRun(t: Target, wf: string, items: number): Promise<Figures> {
  const cpu0 = cpuOf(t.pids);
  const started = await post(`${t.base}/workflows/${wf}/runs`, t.admin, { input: { items: Array.from({ length: items }, (_, i) => i) } });
  if (started.status !== 201) throw new Error(`run: ${JSON.stringify(started.body)}`);
  const id = started.body.data.id as string;
  let run: any;
  await waitFor(
    `the map of ${items} to end`,
    async () =>
      ["succeeded", "failed", "cancelled"].includes((run = await getData(`${t.base}/workflows/${wf}/runs/${id}`, t.admin)).status),
    600_000,
  );
  const cpu = cpuOf(t.pids) - cpu0;
  if (run.status !== "succeeded") {
    const failed = ((await getData(`${t.base}/runs?parent_run_id=${id}&status=failed&per_page=1`, t.admin)) as any[])[0];
    throw new Error(
      `the map run ${id} ended ${run.status}: ${JSON.stringify(run.steps[0])}; a failed child: ${JSON.stringify(failed?.steps)}`,
    );
  }
  const children = await every(`${t.base}/runs?parent_run_id=${id}`, t.admin);
  if (children.length !== items) throw new Error(`the map run ${id} has ${children.length} children, not ${items}`);
  return rates(children, cpu);
}

async function measure(label: string, t: Target): Promise<void> {
  const leaf = await create(t, { name: "square", trigger: { type: "manual" }, steps: [STEP] });
  const map = (name: string, each: Record<string, unknown>) =>
    create(t, {
      name,
      trigger: { type: "manual" },
      steps: [{ id: "each", type: "map", items: "{{ input.items }}", max_concurrency: CONCURRENCY, ...each }],
    });
  const inline = await map("map inline", { steps: [STEP] });
  const saved = await map("map workflow_id", { workflow_id: leaf });

  // Warm-up: every path once, smaller.
  await plainRuns(t, leaf, 200);
  await mapRun(t, inline, 100);
  await mapRun(t, saved, 100);

  const base = await plainRuns(t, leaf, ITEMS);
  const rows: [string, Figures][] = [
    [`${ITEMS} plain runs (32 clients)`, base],
    [`map, inline steps`, await mapRun(t, inline, ITEMS)],
    [`map, workflow_id`, await mapRun(t, saved, ITEMS)],
  ];
  console.log(`\n${label}: ${ITEMS} items, max_concurrency ${CONCURRENCY}; ratios to the plain runs of the same step`);
  console.log(`${"".padEnd(30)} started/s  finished/s  ratio   CPU ms/child  ratio   wall ms`);
  for (const [name, f] of rows)
    console.log(
      `${name.padEnd(30)} ${String(f.startedPerS).padStart(9)} ${String(f.finishedPerS).padStart(11)}  ${(f.finishedPerS / base.finishedPerS).toFixed(2)}x ${f.cpuMs.toFixed(2).padStart(13)}  ${(f.cpuMs / base.cpuMs).toFixed(2)}x ${String(f.wallMs).padStart(9)}`,
    );
}

async function main(): Promise<void> {
  if (MODES.includes("single")) {
    const server = await startServer();
    try {
      await measure("single process", { base: server.base, admin: server.admin, pids: [server.pid] });
    } finally {
      await server.stop();
    }
  }
  if (MODES.includes("cluster")) {
    const t = new Teardown();
    try {
      await measure("cluster (api | 2 workflows nodes, NATS)", await startCluster(t, RUN_BENCH_ENV));
    } finally {
      await t.unwind();
    }
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
