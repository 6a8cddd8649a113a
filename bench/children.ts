/**
 * Child runs' cost: runs of a workflow whose run_workflow step waits for a child doing an http GET
 * to a local receiver, against the one-step workflow doing that GET itself, in one process of this
 * checkout:
 *   executed — runs executed/s (their GET received) while 32 clients start them as fast as they can
 *   cpu/run  — the server's CPU (from /proc) per run over that burst (for a parent: its child's too)
 *   resume   — p50/p99 from a child's end to its parent's step ending, at a fixed BENCH_RATE runs/s
 *
 *   npm run --silent build && node dist/bench/children.js      (BENCH_SECONDS=6 BENCH_RATE=100)
 */
import { cpuMs, flood, getData as getJson, paced, post, quantile, rate, Receiver, startServer } from "./lib";
import { waitFor } from "../tools/procs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const RATE = Number(process.env.BENCH_RATE ?? 100);

const get = (origin: string) => ({ id: "call", type: "http", method: "GET", url: `${origin}/run?id={{input.n}}&sent={{input.sent}}` });

async function measure(label: string, withChild: boolean, rx: Receiver): Promise<void> {
  const server = await startServer();
  const { pid, admin, base } = server;
  try {
    const leaf = await post(`${base}/workflows`, admin, { name: "leaf", trigger: { type: "manual" }, steps: [get(rx.origin)] });
    if (leaf.status !== 201) throw new Error(`workflow: ${JSON.stringify(leaf.body)}`);
    const steps = withChild
      ? [{ id: "child", type: "run_workflow", workflow_id: leaf.body.data.id, input: { n: "{{ input.n }}", sent: "{{ input.sent }}" } }]
      : [get(rx.origin)];
    const wf = await post(`${base}/workflows`, admin, { name: label, trigger: { type: "manual" }, steps });
    if (wf.status !== 201) throw new Error(`workflow: ${JSON.stringify(wf.body)}`);
    const url = `${base}/workflows/${wf.body.data.id}/runs`;
    let n = 0;
    const next = (sent = 0) => ({ input: { n: n++, sent } });

    await flood(url, admin, () => next(), { duration: 2, connections: 32 });
    await rx.waitForUnique(n, 120_000);
    await rx.reset();
    const from = n;
    const cpu0 = cpuMs(pid);
    await flood(url, admin, () => next(), { duration: SECONDS, connections: 32 });
    const executed = await rx.waitForUnique(n - from, 300_000);
    // A parent's run has ended only once its child's end resumed it: wait for every run to end.
    await waitFor("every run to end", async () => (await getJson(`${url}?status=running&per_page=1`, admin)).length === 0, 120_000);
    await waitFor("every run to end", async () => (await getJson(`${url}?status=waiting&per_page=1`, admin)).length === 0, 120_000);
    const cpu = (cpuMs(pid) - cpu0) / (n - from);

    await rx.reset();
    const cpu1 = cpuMs(pid);
    const fixed = await paced(url, admin, RATE, SECONDS, (sent) => next(sent));
    await rx.waitForUnique(fixed.accepted, 60_000);
    await waitFor("the paced runs to end", async () => (await getJson(`${url}?status=waiting&per_page=1`, admin)).length === 0, 60_000);
    const cpuFixed = (cpuMs(pid) - cpu1) / fixed.accepted;
    let resume = "";
    if (withChild) {
      const parents = (await getJson(`${url}?status=succeeded&per_page=100`, admin)) as any[];
      const gaps: number[] = [];
      for (const p of parents) {
        const child = await getJson(`${base}/workflows/${leaf.body.data.id}/runs/${p.steps[0].output.run_id}`, admin);
        gaps.push(Date.parse(p.steps[0].finished_at) - Date.parse(child.finished_at));
      }
      resume = `, child ended → parent resumed p50 ${quantile(gaps, 0.5)} ms, p99 ${quantile(gaps, 0.99)} ms at ${RATE}/s (${gaps.length} runs)`;
    }
    console.log(
      `${label}: executed ${rate(executed)}/s, CPU ${cpu.toFixed(3)} ms/run saturated, ${cpuFixed.toFixed(3)} ms/run at ${RATE}/s${resume}`,
    );
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const rx = await Receiver.start();
  try {
    await measure("one step (http)", false, rx);
    await measure("run_workflow waiting for a child (http)", true, rx);
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
