/**
 * Schedule ticks: 1,000 scheduled workflows (five organizations of 200, the workflows quota of an
 * environment) all due at the same instant. For each of BENCH_ROUNDS ticks it prints how long from
 * the tick to the 1,000th run stored, ticks started per second, and how long until every one of
 * them had run (a one-step `set` workflow). Two modes:
 *   single   — the whole platform in one process on the embedded store, its clock moved by the
 *              bench to the next hour of an hourly schedule
 *   cluster  — an API node and two workflows nodes over NATS racing for the same ticks, on the
 *              system clock: a schedule of every minute, measured from each minute's start
 *              (BENCH_MODE=single skips it: it waits for real minutes)
 *
 *   npm run bench:schedules     (BENCH_ROUNDS=3, BENCH_MODE=single|cluster|both)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { createBroker } from "../app/broker";
import { loadSettings } from "../shared/config";
import type { Clock } from "../shared/runtime/clock";
import { runCli, startNode } from "../tools/procs";
import { natsFor, post, storeNode, Teardown } from "./lib";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const MODE = process.env.BENCH_MODE ?? "both";
const ORGS = 5;
const PER_ORG = 200;
const HOUR = 3_600_000;

async function total(base: string, key: string, status?: string): Promise<number> {
  const res = await request(`${base}/runs?limit=1${status ? `&status=${status}` : ""}`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.body.json()) as { meta: { total: number } };
  return body.meta.total;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 300_000): Promise<number> {
  const start = performance.now();
  while (!(await check())) {
    if (performance.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 50));
  }
  return performance.now();
}

/** Five organizations of 200 workflows ticking every `everyMs`; answers their live keys. */
async function seed(base: string, keys: string[], everyMs: number): Promise<void> {
  await Promise.all(
    keys.map(async (key) => {
      for (let batch = 0; batch < PER_ORG; batch += 50) {
        await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const res = await post(`${base}/workflows`, key, {
              name: `scheduled ${batch + i}`,
              trigger: { type: "schedule", every_ms: everyMs, overlap: "allow", input: { n: batch + i } },
              steps: [{ id: "noted", type: "set", output: "{{ input.n }}" }],
            });
            if (res.status !== 201) throw new Error(`workflow: ${JSON.stringify(res.body)}`);
          }),
        );
      }
    }),
  );
}

const runsIn = async (base: string, keys: string[], status?: string) =>
  (await Promise.all(keys.map((k) => total(base, k, status)))).reduce((a, b) => a + b, 0);

function line(round: number, ms: number, ranMs: number): string {
  const perSecond = Math.round((ORGS * PER_ORG * 1000) / ms);
  return `${String(round).padStart(5)}  ${ms.toFixed(0).padStart(9)}  ${String(perSecond).padStart(7)}  ${ranMs.toFixed(0).padStart(10)}`;
}

/** Two workflows nodes on the system clock: each round is the start of a minute. */
async function cluster(): Promise<void> {
  const t = new Teardown();
  try {
    const common = { RATE_LIMIT_MAX: "10000000", LOG_LEVEL: "warn" };
    const { dir, env, base } = await storeNode(t, "api", common, "gateway,auth,keys,orgs,events,webhooks", await natsFor(t));
    for (const name of ["workflows-1", "workflows-2"]) {
      const node = startNode(name, { ...env, SERVICES: "workflows" });
      t.add(() => node.kill("SIGKILL"));
    }
    const keys: string[] = [];
    for (let o = 0; o < ORGS; o += 1) {
      keys.push(runCli(["orgs", "create", "--name", `Org ${o}`], { DATA_DIR: dir }).api_keys.find((k) => k.environment === "live")!.key);
    }
    await until(
      "the workflows nodes",
      async () => (await request(`${base}/workflows`, { headers: { authorization: `Bearer ${keys[0]}` } })).statusCode === 200,
    );
    await seed(base, keys, 60_000);
    console.log(`\ncluster: api node and two workflows nodes over NATS, ${ORGS * PER_ORG} workflows every minute (system clock)`);
    console.log("round  stored ms  ticks/s  all run ms");
    // The first whole minute after the seeding: every workflow is due then.
    let tick = Math.floor(Date.now() / 60_000) * 60_000 + 60_000;
    for (let round = 1; round <= ROUNDS; round += 1) {
      await until("the minute before the tick", async () => Date.now() >= tick - 5_000, 120_000);
      const before = await runsIn(base, keys);
      const stored = await until("every tick's run", async () => (await runsIn(base, keys)) >= before + ORGS * PER_ORG);
      const storedAt = performance.timeOrigin + stored;
      const ran = await until("every run to end", async () => (await runsIn(base, keys, "succeeded")) >= before + ORGS * PER_ORG);
      console.log(line(round, storedAt - tick, performance.timeOrigin + ran - tick));
      tick += 60_000;
    }
  } finally {
    await t.unwind();
  }
}

async function single(): Promise<void> {
  let now = Math.floor(Date.now() / HOUR) * HOUR + 60_000;
  const clock: Clock = { now: () => now };
  const dir = mkdtempSync(join(tmpdir(), "wfp-bench-schedules-"));
  const settings = loadSettings({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "warn", DATA_DIR: dir, RATE_LIMIT_MAX: "10000000" });
  const broker = createBroker(settings, {}, undefined, clock);
  await broker.start();
  try {
    const gateway = broker.getLocalService("gateway") as unknown as { server: { address(): { port: number } } };
    const base = `http://127.0.0.1:${gateway.server.address().port}/v1`;
    const keys: string[] = [];
    for (let o = 0; o < ORGS; o += 1) {
      const org = await broker.call<{ api_keys: { key: string; environment: string }[] }, { name: string }>("orgs.create", {
        name: `Org ${o}`,
      });
      keys.push(org.api_keys.find((k) => k.environment === "live")!.key);
    }
    await seed(base, keys, HOUR);
    const due = ORGS * PER_ORG;
    console.log(`single process: ${due} workflows every hour, all due at the same tick, the clock moved by the bench`);
    console.log("round  stored ms  ticks/s  all run ms");
    for (let round = 1; round <= ROUNDS; round += 1) {
      now = Math.floor(now / HOUR) * HOUR + HOUR;
      const tick = performance.now();
      const stored = await until("every tick's run", async () => (await runsIn(base, keys)) >= round * due);
      const ran = await until("every run to end", async () => (await runsIn(base, keys, "succeeded")) >= round * due);
      console.log(line(round, stored - tick, ran - tick));
    }
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (MODE !== "cluster") await single();
  if (MODE !== "single") await cluster();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
