/**
 * The workflow language's cost: runs of a ten-step workflow with conditions (some steps skipped)
 * and set steps computing values, ending in an http GET to a local receiver, against the one-step
 * workflow (that GET alone), in one process of this checkout:
 *   executed — runs executed/s while 32 clients start them as fast as they can
 *   cpu/run  — the server's CPU (from /proc) per run over that burst, and at a fixed BENCH_RATE runs/s
 *
 *   npm run --silent build && node dist/bench/language.js      (BENCH_SECONDS=6 BENCH_RATE=100)
 */
import { cpuMs, flood, paced, post, rate, Receiver, startServer } from "./lib";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const RATE = Number(process.env.BENCH_RATE ?? 100);

const tenSteps = (origin: string) => [
  { id: "order", type: "set", output: { total: "{{ input.qty * input.price }}", big: "{{ input.qty * input.price >= 100 }}" } },
  { id: "tax", type: "set", if: "steps.order.output.big", output: { vat: "{{ steps.order.output.total * 0.2 }}" } },
  { id: "small", type: "set", if: "!steps.order.output.big", output: { note: "small order" } },
  { id: "tags", type: "set", output: "{{ input.tags.map(t, t.upper()).join(',') }}" },
  { id: "never", type: "stop", if: "input.qty < 0", status: "failed", message: "negative quantity" },
  { id: "email", type: "set", output: "{{ default(input.email, 'none').trim().lower() }}" },
  { id: "count", type: "set", output: "{{ size(input.tags) + steps.order.output.total }}" },
  { id: "summary", type: "set", output: "order {{input.n}}: {{ steps.tags.output }} for {{ steps.email.output }}" },
  { id: "flag", type: "set", if: "steps.tax.status == 'succeeded'", output: { taxed: true } },
  { id: "call", type: "http", method: "GET", url: `${origin}/run?id={{input.n}}&sent={{input.sent}}` },
];
const oneStep = (origin: string) => [{ id: "call", type: "http", method: "GET", url: `${origin}/run?id={{input.n}}&sent={{input.sent}}` }];

async function measure(label: string, steps: (origin: string) => unknown[], rx: Receiver): Promise<void> {
  const server = await startServer();
  const { pid, admin, base } = server;
  try {
    const wf = await post(`${base}/workflows`, admin, { name: label, trigger: { type: "manual" }, steps: steps(rx.origin) });
    if (wf.status !== 201) throw new Error(`workflow: ${JSON.stringify(wf.body)}`);
    const url = `${base}/workflows/${wf.body.data.id}/runs`;
    let n = 0;
    const next = (sent = 0) => ({ input: { n: n++, sent, qty: n % 7, price: 19.5, tags: ["a", "b", "c"], email: " Ada@Example.com " } });

    await flood(url, admin, () => next(), { duration: 2, connections: 32 });
    await rx.waitForUnique(n, 120_000);
    await rx.reset();
    let from = n;
    let cpu0 = cpuMs(pid);
    await flood(url, admin, () => next(), { duration: SECONDS, connections: 32 });
    const executed = await rx.waitForUnique(n - from, 300_000);
    const cpu = (cpuMs(pid) - cpu0) / (n - from);

    await rx.reset();
    from = n;
    cpu0 = cpuMs(pid);
    const fixed = await paced(url, admin, RATE, SECONDS, (sent) => next(sent));
    await rx.waitForUnique(fixed.accepted, 60_000);
    const cpuFixed = (cpuMs(pid) - cpu0) / (n - from);
    console.log(
      `${label}: executed ${rate(executed)}/s, CPU ${cpu.toFixed(3)} ms/run saturated, ${cpuFixed.toFixed(3)} ms/run at ${RATE}/s`,
    );
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  const rx = await Receiver.start();
  try {
    await measure("one step (http)", oneStep, rx);
    await measure("ten steps (conditions, set, http)", tenSteps, rx);
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
