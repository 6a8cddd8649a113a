/**
 * Workflow runs of two or more builds, alternated in pairs in one session: on a shared 2-core
 * machine the same build moves ±15–20 % between runs, so "unchanged or better" is only visible as
 * same-pair ratios. Each root is a checkout with its own `npm run build` (another commit: `git
 * worktree add /tmp/old <sha>`, link node_modules, build there). For each build, in one process:
 *   started/executed — runs/s while 32 clients start a one-step `http` workflow as fast as they can
 *   cpu/run          — the server's CPU (from /proc) per run over that burst, and at a fixed
 *                      COMPARE_RATE runs/s, where group commits are the same size for every build
 *   p50              — from the start request leaving to the step's request arriving, at 100 runs/s
 * It prints each run's figures and, for every root after the first, min/median/max of the ratios to
 * the first root's run in the same pair (the order flips every pair).
 *
 *   npm run bench:compare -- /tmp/old .      (BENCH_SECONDS=6 PAIRS=3 COMPARE_RATE=400)
 */
import { join, resolve } from "node:path";
import { cpuMs, flood, paced, post, quantile, rate, Receiver, startServer } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const PAIRS = Number(process.env.PAIRS ?? 3);
const FIXED_RATE = Number(process.env.COMPARE_RATE ?? 400);

interface Figures {
  started: number;
  executed: number;
  cpu: number;
  cpuFixed: number;
  p50: number;
}

async function measure(root: string, rx: Receiver): Promise<Figures> {
  const server = await startServer({ dist: join(root, "dist"), what: `${root} to listen` });
  const { pid, admin, base } = server;
  try {
    const step = { id: "call", type: "http", method: "GET", url: `${rx.origin}/run?id={{input.n}}&sent={{input.sent}}` };
    const wf = await post(`${base}/workflows`, admin, { name: "bench", trigger: { type: "manual" }, steps: [step] });
    const url = `${base}/workflows/${wf.body.data.id}/runs`;
    let n = 0;
    const next = (sent = 0) => ({ input: { n: n++, sent } });

    // Warm-up, then the saturated burst and its CPU.
    await flood(url, admin, () => next(), { duration: 2, connections: 32 });
    await rx.waitForUnique(n, 120_000);
    await rx.reset();
    let from = n;
    let cpu0 = cpuMs(pid);
    const burst = await flood(url, admin, () => next(), { duration: SECONDS, connections: 32 });
    const executed = await rx.waitForUnique(n - from, 300_000);
    const cpu = (cpuMs(pid) - cpu0) / (n - from);

    await rx.reset();
    from = n;
    cpu0 = cpuMs(pid);
    const fixed = await paced(url, admin, FIXED_RATE, SECONDS, () => next());
    await rx.waitForUnique(fixed.accepted, 60_000);
    const cpuFixed = (cpuMs(pid) - cpu0) / (n - from);

    await rx.reset();
    const steady = await paced(url, admin, 100, 4, (sent) => next(sent));
    const arrived = await rx.waitForUnique(steady.accepted, 60_000);
    return { started: burst.rps, executed: rate(executed), cpu, cpuFixed, p50: quantile(arrived.latencies, 0.5) };
  } finally {
    await server.stop();
  }
}

const spread = (xs: number[]): string => {
  const sorted = [...xs].sort((a, b) => a - b);
  return [sorted[0], sorted[Math.floor(sorted.length / 2)], sorted[sorted.length - 1]].map((x) => x.toFixed(2)).join(" / ");
};

async function main(): Promise<void> {
  const roots = process.argv.slice(2).map((r) => resolve(r));
  if (roots.length < 2) throw new Error("usage: npm run bench:compare -- <baseline checkout> <checkout> [more checkouts]");
  const rx = await Receiver.start();
  const results: Figures[][] = roots.map(() => []);
  try {
    for (let pair = 0; pair < PAIRS; pair++) {
      const order = roots.map((_, i) => i);
      if (pair % 2 === 1) order.reverse();
      for (const i of order) {
        const f = await measure(roots[i], rx);
        results[i].push(f);
        console.log(
          `pair ${pair + 1} ${roots[i]}: started ${f.started}/s, executed ${f.executed}/s, ` +
            `CPU ${f.cpu.toFixed(3)} ms/run (${f.cpuFixed.toFixed(3)} at ${FIXED_RATE}/s), p50 at 100/s ${f.p50.toFixed(2)} ms`,
        );
      }
    }
  } finally {
    rx.stop();
  }
  console.log(`\nmin / median / max of same-pair ratios to ${roots[0]}:`);
  for (let i = 1; i < roots.length; i++) {
    const ratio = (field: keyof Figures) => spread(results[i].map((f, pair) => f[field] / results[0][pair][field]));
    console.log(`${roots[i]}`);
    console.log(`  started/s ${ratio("started")}x, executed/s ${ratio("executed")}x`);
    console.log(`  CPU per run ${ratio("cpu")}x saturated, ${ratio("cpuFixed")}x at ${FIXED_RATE}/s; p50 at 100/s ${ratio("p50")}x`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
