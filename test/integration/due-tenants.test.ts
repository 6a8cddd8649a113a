import { mkdtempSync, rmSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BEHIND_EVERY_MS, DISCOVER_ORGS, DISCOVER_ROWS, DueTenants } from "../../services/workflows/due-tenants";
import type { RunDoc } from "../../services/workflows/run-doc";
import { newRun } from "../../services/workflows/runs.logic";
import { TenantSlots } from "../../services/workflows/tenant-slots";
import type { WorkflowDoc } from "../../services/workflows/workflows.logic";
import { STORE } from "../../services/workflows/workflows.store";
import { DATABASE_FILE, SqliteStore } from "../../shared/storage/sqlite";
import { openCollection, type Collection, type Environment, type Tenant } from "../../shared/storage/types";

/**
 * Finding tenants with due runs behind one tenant's backlog (due-tenants.ts), on a real store: the
 * reads stay bounded (rows returned, statements answered from an index) however long the backlog,
 * and every tenant with a due run is found within a bounded number of reads.
 */
const SHARES = { total: 8, perOrg: 6, perEnvironment: 4 };
const HOG = { org_id: "org_hog", environment: "live" } as const;
const BACKLOG = 2_000;

let dir: string;
let store: SqliteStore;
let runs: Collection<RunDoc>;
/** What the finder read: rows per pluck, and every statement. */
const plucks: number[] = [];
const statements = new Set<string>();
let watching = false;

function runOf(org_id: string, environment: Environment, dueAt: number | undefined): RunDoc {
  const at = new Date().toISOString();
  const wf: WorkflowDoc = {
    id: `wf_${org_id}`,
    org_id,
    environment,
    name: "w",
    description: null,
    status: "active",
    trigger: { type: "manual" },
    steps: [{ id: "wait", type: "delay", duration_ms: 1000 }],
    version: 1,
    created_at: at,
    updated_at: at,
  } as WorkflowDoc;
  const { due_at: _due, ...run } = newRun(wf, {}, { type: "manual" }, Date.now());
  // No due time: the run ended (or waits for a person), as the engine leaves it.
  return dueAt === undefined ? { ...run, status: "succeeded" } : { ...run, due_at: dueAt };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wfp-due-tenants-"));
  store = new SqliteStore(dir);
  const prepare = store.statement.bind(store);
  store.statement = (...args: Parameters<SqliteStore["statement"]>) => {
    if (watching) statements.add(args[0]);
    return prepare(...args);
  };
  const inner = openCollection(store, STORE.owns.runs);
  runs = new Proxy(inner, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop !== "pluck" || typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const rows = (await (value as (...a: unknown[]) => Promise<unknown[]>).apply(target, args)) as unknown[];
        if (watching) plucks.push(rows.length);
        return rows;
      };
    },
  });
  const now = Date.now();
  // The hog's backlog, due before anyone else's; organizations with only runs that ended or
  // wait with no due time; one due later; and three quiet tenants due behind the backlog.
  const stored = [
    ...Array.from({ length: BACKLOG }, (_, i) => runOf(HOG.org_id, HOG.environment, now - 100_000 + i)),
    ...Array.from({ length: 30 }, (_, i) => runOf(`org_idle_${String(i).padStart(2, "0")}`, "live", undefined)),
    runOf("org_later", "live", now + 3_600_000),
    runOf("org_quiet_a", "live", now - 1_000),
    runOf("org_quiet_b", "test", now - 1_000),
    runOf("org_zz_quiet", "live", now - 1_000),
  ];
  await store.atomically(stored.map((doc) => ({ op: "insert" as const, collection: inner, doc })));
});

afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The tenants in turn with room, each taken once (the finder only queues them). */
function queued(slots: TenantSlots): string[] {
  const out: string[] = [];
  for (let t = slots.next(); t && !out.includes(`${t.org_id}/${t.environment}`); t = slots.next()) out.push(`${t.org_id}/${t.environment}`);
  return out;
}

describe("tenants with due runs behind one tenant's backlog", () => {
  it("are all found within a bounded number of reads, each reading a bounded number of rows from an index", async () => {
    const slots = new TenantSlots(SHARES);
    while (slots.room(HOG)) slots.take(HOG as Required<Tenant>);
    const finder = new DueTenants(runs, slots);
    const found = new Set<string>();
    watching = true;
    // Each read looks at DISCOVER_ORGS organizations at most: the 35 with due times go round in three.
    const start = Date.now();
    for (let read = 0; read < 3; read += 1) {
      // Reads behind the most overdue runs are at least BEHIND_EVERY_MS apart: the clock given moves on.
      await finder.discover(start + read * BEHIND_EVERY_MS);
      for (const t of queued(slots)) found.add(t);
    }
    watching = false;
    expect([...found].sort()).toEqual(["org_quiet_a/live", "org_quiet_b/test", "org_zz_quiet/live"]);
    expect(plucks.length).toBeGreaterThan(3);
    expect(Math.max(...plucks)).toBe(DISCOVER_ROWS);
    // Per read: the most overdue rows, then per organization one seek to it and one per environment.
    expect(plucks.length).toBeLessThanOrEqual(3 * (1 + 3 * DISCOVER_ORGS + 1));
    const db = new DatabaseSync(join(dir, DATABASE_FILE), { readOnly: true });
    try {
      const plans = [...statements].map((sql) =>
        (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join(" | "),
      );
      expect(plans.length).toBeGreaterThanOrEqual(3);
      for (const plan of plans) {
        expect(plan).toMatch(/^SEARCH workflow_runs USING COVERING INDEX /);
        expect(plan).not.toContain("TEMP B-TREE");
      }
      // Each walks its index from a seek and stops at its LIMIT: none filters entries out after the
      // seek (as `org_id NOT IN (…)` did), which would walk the whole backlog to skip it.
      for (const sql of statements) {
        expect(sql).toMatch(/ LIMIT \d+$/);
        expect(sql).not.toMatch(/\bNOT\b/);
      }
    } finally {
      db.close();
    }
  });

  it("looks behind the most overdue runs at most once per BEHIND_EVERY_MS", async () => {
    const slots = new TenantSlots(SHARES);
    while (slots.room(HOG)) slots.take(HOG as Required<Tenant>);
    const finder = new DueTenants(runs, slots);
    const start = Date.now();
    plucks.length = 0;
    watching = true;
    expect(await finder.discover(start)).toBe(true);
    const first = plucks.length;
    expect(await finder.discover(start + BEHIND_EVERY_MS - 1)).toBe(false);
    watching = false;
    expect(first).toBeGreaterThan(1);
    // The second read: the most overdue rows only.
    expect(plucks.slice(first)).toEqual([DISCOVER_ROWS]);
  });

  it("reads the most overdue runs only, while a tenant among them has room", async () => {
    const slots = new TenantSlots(SHARES);
    const finder = new DueTenants(runs, slots);
    plucks.length = 0;
    watching = true;
    expect(await finder.discover(Date.now())).toBe(true);
    watching = false;
    expect(plucks).toEqual([DISCOVER_ROWS]);
    expect(queued(slots)).toEqual(["org_hog/live"]);
  });
});
