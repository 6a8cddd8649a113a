import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../app/broker";
import { loadSettings } from "../../shared/config";
import { newId } from "../../shared/ids";
import { DATABASE_FILE, SqliteStore } from "../../shared/storage/sqlite";
import { openCollection, type Collection, type Doc, type IndexSpec, type Scope, type Store } from "../../shared/storage/types";
import type { RunDoc } from "../../services/workflows/run-doc";
import { WAITS, type WaitDoc } from "../../services/workflows/wait-records";
import { keyOf } from "../../services/workflows/waits.logic";
import { waitFor } from "../../tools/procs";
import { api, type Bootstrap } from "../helpers/platform";

/**
 * One event resolves the wait it matches among 10,000 runs waiting on its type, each with another
 * key, reading as many documents as among 100: the registrations are found through their key's
 * index, never by reading the runs that wait (read counted as bounded-reads.test.ts counts them).
 */

/** Documents the store returned to reads scoped to the watched organization while `active`, by collection. */
class Reads {
  active = false;
  org = "";
  docs = new Map<string, number>();

  add(scope: Scope, collection: string, n: number): void {
    if (this.active && "org_id" in scope && scope.org_id === this.org) this.docs.set(collection, (this.docs.get(collection) ?? 0) + n);
  }
  get total(): number {
    return [...this.docs.values()].reduce((a, b) => a + b, 0);
  }
}

function countingStore(inner: Store, reads: Reads): Store {
  const wrap = <T extends Doc>(col: Collection<T>): Collection<T> =>
    new Proxy(col, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== "function") return value;
        const call = (...args: unknown[]) => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        switch (prop) {
          case "get":
          case "findOne":
            return async (scope: Scope, ...rest: unknown[]) => {
              const doc = await call(scope, ...rest);
              if (doc) reads.add(scope, target.name, 1);
              return doc;
            };
          case "find":
          case "pluck":
            return async (scope: Scope, ...rest: unknown[]) => {
              const docs = (await call(scope, ...rest)) as T[];
              reads.add(scope, target.name, docs.length);
              return docs;
            };
          case "page":
            return async (scope: Scope, ...rest: unknown[]) => {
              const page = (await call(scope, ...rest)) as { items: T[] };
              reads.add(scope, target.name, page.items.length);
              return page;
            };
          case "count":
            return async (scope: Scope, filter: unknown, options?: { limit?: number }) => {
              const n = (await call(scope, filter, options)) as number;
              reads.add(scope, target.name, n);
              return n;
            };
          default:
            return (value as (...a: unknown[]) => unknown).bind(target);
        }
      },
    });
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === "collection") return (name: string, indexes?: IndexSpec[]) => wrap(target.collection(name, indexes));
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

let dir: string;
let inner: SqliteStore;
let broker: ServiceBroker;
let baseUrl: string;
let key: string;
let wf: string;
const reads = new Reads();
const statements = new Set<string>();
let runs: Collection<RunDoc>;
let waits: Collection<WaitDoc>;
/** A run waiting through the API: the model the seeded runs copy. */
let model: { run: RunDoc; wait: WaitDoc };
let seeded = 0;

const call = (method: string, path: string, body?: unknown) => api(baseUrl, method, path, { key, body });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wfp-wait-reads-"));
  inner = new SqliteStore(dir);
  const prepare = inner.statement.bind(inner);
  inner.statement = (...args: Parameters<SqliteStore["statement"]>) => {
    if (reads.active) statements.add(args[0]);
    return prepare(...args);
  };
  const settings = loadSettings({ DATA_DIR: dir, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "false", RATE_LIMIT_MAX: "1000000" });
  broker = createBroker(settings, {}, countingStore(inner, reads));
  await broker.start();
  const gateway = broker.getLocalService("gateway") as unknown as { server: { address(): { port: number } } };
  baseUrl = `http://127.0.0.1:${gateway.server.address().port}/v1`;
  const made = await broker.call<Bootstrap, { name: string }>("orgs.create", { name: "Waiting" });
  key = made.api_keys.find((k) => k.environment === "live")!.key;
  reads.org = made.org.id;
  runs = openCollection(inner, { name: "workflow_runs", indexes: [] });
  waits = openCollection(inner, WAITS);
  const created = await call("POST", "/workflows", {
    name: "pays",
    trigger: { type: "manual" },
    steps: [{ id: "pay", type: "wait_for_event", event_type: "pay.done", match: { "data.order_id": "{{ input.order_id }}" } }],
  });
  wf = created.body.data.id;
  const run = (await call("POST", `/workflows/${wf}/runs`, { input: { order_id: "model" } })).body.data.id as string;
  const tenant = { org_id: made.org.id, environment: "live" as const };
  await waitFor("the model run to wait", async () => (await runs.get(tenant, run))?.status === "waiting");
  model = { run: (await runs.get(tenant, run))!, wait: (await waits.findOne(tenant, { run_id: run }))! };
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs waiting as the model does, each for its own order, until there are `total` besides it. */
async function seedTo(total: number): Promise<void> {
  for (; seeded < total;) {
    const batch = Math.min(500, total - seeded);
    await Promise.all(
      Array.from({ length: batch }, async (_, i) => {
        const order = `o-${seeded + i}`;
        const id = newId("run");
        const match = { "data.order_id": order };
        const steps = model.run.steps.map((s) => ({ ...s, waiting_for: { event_type: "pay.done", match } }));
        await runs.insert({ ...model.run, id, input: { order_id: order }, steps });
        await waits.insert({ ...model.wait, id: `${id}/0/1`, run_id: id, match, key: keyOf("pay.done", match) });
      }),
    );
    seeded += batch;
  }
}

/** Emits the event of one waiting order and answers what the store read for it, once its run has resumed. */
async function resolveOne(order: string): Promise<Map<string, number>> {
  const tenant = { org_id: reads.org, environment: "live" as const };
  const waiting = await waits.findOne(tenant, { key: keyOf("pay.done", { "data.order_id": order }) });
  reads.docs = new Map();
  reads.active = true;
  const res = await call("POST", "/events", { type: "pay.done", data: { order_id: order } });
  expect(res.status).toBe(201);
  await waitFor(`the run of ${order} to resume`, async () => (await runs.get(tenant, waiting!.run_id))?.status === "succeeded");
  reads.active = false;
  return reads.docs;
}

describe("resolving a wait among many", () => {
  it("reads as many documents among 10,000 waiting runs as among 100, one registration among them", async () => {
    await seedTo(100);
    const small = await resolveOne("o-50");
    await seedTo(10_000);
    expect(await waits.count({ org_id: reads.org, environment: "live" }, {})).toBeGreaterThanOrEqual(9_999);
    const big = await resolveOne("o-5000");
    console.log(`documents read to resolve one wait: among 100 ${JSON.stringify([...small])}, among 10,000 ${JSON.stringify([...big])}`);
    expect(big.get("workflow_waits")).toBe(1);
    expect(big.get("workflow_wait_shapes")).toBe(1);
    // The storage accounting reads its counter rows on its own timer, whatever the request.
    const ours = (m: Map<string, number>) => Object.fromEntries([...m].filter(([name]) => !name.startsWith("storage_usage")));
    expect(ours(big)).toEqual(ours(small));
    expect([...big.values()].reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(20);
  }, 180_000);

  it("one event resumes every run waiting for its key, more than a page of them", async () => {
    const tenant = { org_id: reads.org, environment: "live" as const };
    const match = { "data.order_id": "shared" };
    const ids = Array.from({ length: 450 }, () => newId("run"));
    await Promise.all(
      ids.map(async (id) => {
        const steps = model.run.steps.map((s) => ({ ...s, waiting_for: { event_type: "pay.done", match } }));
        await runs.insert({ ...model.run, id, input: { order_id: "shared" }, steps });
        await waits.insert({ ...model.wait, id: `${id}/0/1`, run_id: id, match, key: keyOf("pay.done", match) });
      }),
    );
    reads.active = true;
    expect((await call("POST", "/events", { type: "pay.done", data: { order_id: "shared" } })).status).toBe(201);
    await waitFor(
      "all 450 runs to resume",
      async () => (await runs.count(tenant, { id: { $in: ids }, status: "succeeded" })) === ids.length,
      120_000,
    );
    reads.active = false;
    expect(await waits.count(tenant, { key: keyOf("pay.done", match) })).toBe(0);
  }, 180_000);

  it("serves the reads of waits and shapes from an index, without sorting (EXPLAIN QUERY PLAN)", () => {
    const db = new DatabaseSync(join(dir, DATABASE_FILE), { readOnly: true });
    try {
      const mine = [...statements].filter((sql) => /^\s*SELECT/i.test(sql) && /workflow_wait/.test(sql));
      expect(mine.length).toBeGreaterThanOrEqual(2);
      for (const sql of mine) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail);
        const bad = plan.filter(
          (d) => (/^SCAN /.test(d) && !/^SCAN (\(subquery|CONSTANT ROW|json_each)/.test(d)) || d.includes("TEMP B-TREE"),
        );
        expect({ sql, bad }).toEqual({ sql, bad: [] });
      }
    } finally {
      db.close();
    }
  });
});
