/**
 * The step-children index (workflows.store.ts): what it costs each child run stored, and what it
 * saves the reads of one step's children. Two SQLite files, one with the runs' indexes as declared
 * and one without that index, store the same child runs (BENCH_PARENTS parents, each with two map
 * steps of BENCH_ITEMS items), in alternating rounds; then each answers, for the last parent:
 *   page   — the first 25 children of its second step in item order (GET /runs?…&step_id=)
 *   count  — its second step's unfinished children, as a map's drive counts them (limit 1,000)
 *   lookup — each item's succeeded child, one read per item, as a retried map's drive does
 * It prints the median over the rounds of ms per 1,000 children stored (each round stores the same
 * children in both files, taking turns at going first), the bytes each index of child runs takes per
 * child (SQLite's dbstat), the median ms of each read, and the SQL plan of each read.
 *
 *   npm run --silent build && node dist/bench/step-children.js  (BENCH_PARENTS=16 BENCH_ITEMS=500 BENCH_ROUNDS=8)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { newId } from "../shared/ids";
import { DATABASE_FILE, SqliteStore } from "../shared/storage/sqlite";
import type { Collection, Filter, FindOptions, IndexSpec } from "../shared/storage/types";
import type { RunDoc } from "../services/workflows/run-doc";
import { STORE } from "../services/workflows/workflows.store";

const PARENTS = Number(process.env.BENCH_PARENTS ?? 16);
const ITEMS = Number(process.env.BENCH_ITEMS ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const IN_FLIGHT = 10;
const T = { org_id: "org_bench", environment: "live" } as const;
const STEPS = ["first", "second"];

const declared = STORE.owns.runs.indexes;
const isStepIndex = (i: IndexSpec) => "parent.step_id" in i.fields;

/** A child run as a map stores it: its parent, item and input, one step, its due time and key. */
function child(parent: string, step: string, index: number): RunDoc {
  const at = new Date().toISOString();
  return {
    id: newId("run"),
    ...T,
    object: undefined as never,
    workflow_id: "wf_bench",
    workflow_version: 1,
    status: "queued",
    attempt: 1,
    input: { item: { order: `ord_${index}`, amount: index * 3, currency: "EUR" }, index },
    trigger: { type: "parent" },
    parent: { run_id: parent, step_id: step, index },
    parent_attempt: 1,
    root_run_id: parent,
    depth: 1,
    trigger_key: `parent/${parent}/${step}/${index}/1`,
    steps: [{ id: "charge", type: "http", status: "pending", attempts: [], output: null }],
    definition: [{ id: "charge", type: "http", url: "https://example.com/charge", method: "POST" }],
    cursor: 0,
    rev: 1,
    due_at: Date.now(),
    outbox: [],
    created_at: at,
    updated_at: at,
  } as unknown as RunDoc;
}

/** Stores `docs` with IN_FLIGHT inserts at a time; answers the ms it took. */
async function store(runs: Collection<RunDoc>, docs: RunDoc[]): Promise<number> {
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < docs.length) await runs.insert(docs[next++]);
    }),
  );
  return performance.now() - start;
}

interface Arm {
  label: string;
  dir: string;
  store: SqliteStore;
  runs: Collection<RunDoc>;
  /** ms per 1,000 children stored, per round. */
  perRound: number[];
}

function arm(label: string, indexes: IndexSpec[]): Arm {
  const dir = mkdtempSync(join(tmpdir(), `wfp-step-children-${label}-`));
  const store = new SqliteStore(dir);
  return { label, dir, store, runs: store.collection<RunDoc>(STORE.owns.runs.name, indexes), perRound: [] };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The median ms of `n` calls of `read`. */
async function timed(n: number, read: () => Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await read();
    ms.push(performance.now() - start);
  }
  return median(ms);
}

/** Bytes of each index on the runs whose name says it is on `parent.run_id` (dbstat). */
function childIndexBytes(a: Arm): Record<string, number> {
  const db = new DatabaseSync(join(a.dir, DATABASE_FILE), { readOnly: true });
  try {
    const rows = db.prepare("SELECT name, SUM(pgsize) AS bytes FROM dbstat WHERE name LIKE '%parent_run_id%' GROUP BY name").all() as {
      name: string;
      bytes: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.name.includes("parent_step_id") ? "step index" : "child index", r.bytes]));
  } finally {
    db.close();
  }
}

/** The plan SQLite chooses for a find (the store's own SQL, as it ran it last). */
function planOf(a: Arm, sql: string): string {
  const db = new DatabaseSync(join(a.dir, DATABASE_FILE), { readOnly: true });
  try {
    return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join(" | ");
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  const arms = [
    arm("with", declared),
    arm(
      "without",
      declared.filter((i) => !isStepIndex(i)),
    ),
  ];
  const seen = new Map<Arm, string[]>();
  for (const a of arms) {
    const prepare = a.store.statement.bind(a.store);
    seen.set(a, []);
    a.store.statement = (...args: Parameters<SqliteStore["statement"]>) => {
      if (/^\s*SELECT/i.test(args[0])) seen.get(a)!.push(args[0]);
      return prepare(...args);
    };
  }
  const parents = Array.from({ length: PARENTS }, () => newId("run"));
  const perRound = Math.ceil(PARENTS / ROUNDS);
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const batch = parents.slice(r * perRound, (r + 1) * perRound);
      // The two steps' items interleaved, as two maps running at once would store them.
      const docsOf = () => batch.flatMap((p) => Array.from({ length: ITEMS }, (_, i) => STEPS.map((s) => child(p, s, i))).flat());
      for (const a of r % 2 === 0 ? arms : [...arms].reverse()) {
        const docs = docsOf();
        a.perRound.push(((await store(a.runs, docs)) / docs.length) * 1000);
      }
    }
    const parent = parents.at(-1)!;
    const step: Filter = { "parent.run_id": parent, "parent.step_id": "second" };
    const reads: [string, number, (runs: Collection<RunDoc>) => Promise<unknown>][] = [
      [
        "page of 25 in item order",
        21,
        (runs) => runs.find(T, step, { sort: { "parent.index": 1, id: -1 } as FindOptions["sort"], limit: 25 }),
      ],
      [
        "count unfinished (≤ 1,000)",
        21,
        (runs) => runs.count(T, { ...step, status: { $in: ["queued", "running", "waiting"] } }, { limit: 1000 }),
      ],
      [
        `${ITEMS} look-ups by item`,
        3,
        async (runs) => {
          for (let i = 0; i < ITEMS; i++) await runs.findOne(T, { ...step, "parent.index": i, status: "succeeded" });
        },
      ],
    ];
    const children = PARENTS * ITEMS * STEPS.length;
    console.log(`${children} child runs (${PARENTS} parents × ${STEPS.length} steps × ${ITEMS} items), ${IN_FLIGHT} inserts in flight`);
    const rows: Record<string, string | number>[] = arms.map((a) => ({
      indexes: a.label === "with" ? "as declared" : "without the step index",
      "ms per 1,000 stored": Math.round(median(a.perRound)),
      ...Object.fromEntries(Object.entries(childIndexBytes(a)).map(([k, b]) => [`${k} B/child`, Math.round(b / children)])),
    }));
    const ratios = arms[0].perRound.map((ms, r) => ms / arms[1].perRound[r]);
    console.log(
      `stored with / without the step index, per round: ${ratios.map((x) => x.toFixed(2)).join(" ")} (median ${median(ratios).toFixed(2)})`,
    );
    const plans: string[] = [];
    for (const [name, n, read] of reads) {
      for (const [i, a] of arms.entries()) {
        seen.get(a)!.length = 0;
        rows[i][`${name} (ms)`] = Number((await timed(n, () => read(a.runs))).toFixed(2));
        plans.push(`${a.label}, ${name}: ${planOf(a, seen.get(a)!.at(-1)!)}`);
      }
    }
    console.table(rows);
    console.log(plans.join("\n"));
  } finally {
    for (const a of arms) {
      await a.store.close();
      rmSync(a.dir, { recursive: true, force: true });
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
