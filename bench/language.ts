/**
 * The workflow language's cost: runs of a ten-step workflow with conditions (some steps skipped)
 * and set steps computing values, ending in an http GET to a local receiver, against the one-step
 * workflow (that GET alone), in one process of this checkout:
 *   executed — runs executed/s while 32 clients start them as fast as they can
 *   cpu/run  — the server's CPU (from /proc) per run over that burst, and at a fixed BENCH_RATE runs/s
 *
 *   npm run --silent build && node dist/bench/language.js      (BENCH_SECONDS=6 BENCH_RATE=100)
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, flood, paced, post, rate, Receiver } from "./lib";
import { freePort, waitFor } from "../tools/procs";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const COMMON = { RATE_LIMIT_MAX: "10000000", RUN_STARTS_PER_MINUTE: "10000000", LOG_LEVEL: "warn", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" };

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
  const dir = mkdtempSync(join(tmpdir(), "wfp-language-"));
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
    await new Promise((exited) => {
      child.once("exit", exited);
      child.kill("SIGKILL");
    });
    rmSync(dir, { recursive: true, force: true });
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
