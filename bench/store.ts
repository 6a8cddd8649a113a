/**
 * The embedded store (SQLite): operations per second for insert, get by id and a compare-and-set
 * update, each with CONCURRENCY operations in flight for about a second.
 *
 *   npm run build && node dist/bench/store.js        (BENCH_MS=1000 BENCH_CONCURRENCY=16)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStore } from "../shared/storage/sqlite";
import type { Collection, Doc, Store } from "../shared/storage/types";

const MS = Number(process.env.BENCH_MS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const A = { org_id: "org_bench", environment: "live" } as const;

interface Job extends Doc {
  status: "queued" | "running";
  n: number;
}

/** Runs `op(i)` with CONCURRENCY in flight until MS have passed; answers operations per second. */
async function rate(op: (i: number) => Promise<unknown>): Promise<number> {
  let done = 0;
  const until = performance.now() + MS;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, worker) => {
      for (let i = worker; performance.now() < until; i += CONCURRENCY) {
        await op(i);
        done += 1;
      }
    }),
  );
  return Math.round(done / ((performance.now() - start) / 1000));
}

async function measure(store: Store, label: string): Promise<Record<string, number | string>> {
  const jobs: Collection<Job> = store.collection<Job>(`jobs_${label}`);
  const ids: string[] = [];
  const insert = await rate(async (i) => {
    const id = `job_${label}_${i}`;
    await jobs.insert({ id, ...A, status: "queued", n: i });
    ids.push(id);
  });
  const get = await rate((i) => jobs.get(A, ids[(i * 7919) % ids.length]));
  // Each worker flips its own document, so every compare-and-set wins and measures a write.
  const cas = await rate(async (i) => {
    const id = ids[i % CONCURRENCY];
    const flipped = await jobs.update(A, { id, status: "queued" }, { $set: { status: "running" } });
    if (!flipped) await jobs.update(A, { id, status: "running" }, { $set: { status: "queued" } });
  });
  return { store: label, "insert/s": insert, "get/s": get, "cas update/s": cas };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "wfp-bench-"));
  const store = new SqliteStore(dir);
  try {
    const rows = [await measure(store, "sqlite")];
    console.log(`embedded store, ${CONCURRENCY} in flight, ${MS} ms per figure`);
    console.table(rows);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
