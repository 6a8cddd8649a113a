/**
 * Schedule ticks: 1,000 scheduled workflows (five organizations of 200, the workflows quota of an
 * environment) all due at the same instant, the whole platform in one process on the embedded
 * store, its clock moved by the bench. For each of BENCH_ROUNDS ticks it prints how long the
 * workflows node took from the tick to the 1,000th run stored, ticks started per second, and how
 * long until every one of them had run (a one-step `set` workflow).
 *
 *   npm run bench:schedules     (BENCH_ROUNDS=3)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { createBroker } from "../app/broker";
import { loadSettings } from "../shared/config";
import type { Clock } from "../shared/runtime/clock";
import { post } from "./lib";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
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

async function main(): Promise<void> {
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
      const key = org.api_keys.find((k) => k.environment === "live")!.key;
      keys.push(key);
      await Promise.all(
        Array.from({ length: PER_ORG }, async (_, i) => {
          const res = await post(`${base}/workflows`, key, {
            name: `hourly ${i}`,
            trigger: { type: "schedule", every_ms: HOUR, overlap: "allow", input: { n: i } },
            steps: [{ id: "noted", type: "set", output: "{{ input.n }}" }],
          });
          if (res.status !== 201) throw new Error(`workflow: ${JSON.stringify(res.body)}`);
        }),
      );
    }
    const all = async (status?: string) => (await Promise.all(keys.map((k) => total(base, k, status)))).reduce((a, b) => a + b, 0);
    const due = ORGS * PER_ORG;
    console.log(`${due} workflows scheduled every hour, all due at the same tick (${ORGS} organizations)`);
    console.log("round  stored ms  ticks/s  all run ms");
    for (let round = 1; round <= ROUNDS; round += 1) {
      now = Math.floor(now / HOUR) * HOUR + HOUR;
      const tick = performance.now();
      const stored = await until("every tick's run", async () => (await all()) >= round * due);
      const ran = await until("every run to end", async () => (await all("succeeded")) >= round * due);
      const ms = stored - tick;
      console.log(
        `${String(round).padStart(5)}  ${ms.toFixed(0).padStart(9)}  ${Math.round((due * 1000) / ms)
          .toString()
          .padStart(7)}  ${(ran - tick).toFixed(0).padStart(10)}`,
      );
    }
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
