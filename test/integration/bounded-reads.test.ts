import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../app/broker";
import { loadSettings } from "../../shared/config";
import { eventDoc, EVENTS, type EventDoc } from "../../shared/records/events";
import { RUN_OUTCOMES, WEBHOOK_OUTCOMES } from "../../shared/records/outcomes";
import { MAX_COUNTED } from "../../shared/api/pagination";
import { DATABASE_FILE, SqliteStore } from "../../shared/storage/sqlite";
import { openCollection, type Collection, type Doc, type IndexSpec, type Scope, type Store } from "../../shared/storage/types";
import { waitFor } from "../../tools/procs";
import { api, type Bootstrap } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

/**
 * No request's cost grows with the data stored: every list and analytics endpoint, asked through
 * the gateway, reads the same number of documents from the store when the data behind it has grown
 * tenfold (200 → 2,000 events, each delivered and each starting a run), counts its total through a
 * bounded count, and runs SQL that SQLite answers from an index (EXPLAIN QUERY PLAN).
 */

/** What the store read for one organization while `active`: documents returned, and every count. */
class Reads {
  active = false;
  org = "";
  docs = 0;
  counts: { collection: string; matched: number; limit?: number }[] = [];

  watched(scope: Scope): boolean {
    return this.active && "org_id" in scope && scope.org_id === this.org;
  }
}

/** A store that tells `reads` what each read of a watched organization returned. */
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
              if (doc && reads.watched(scope)) reads.docs += 1;
              return doc;
            };
          case "find":
            return async (scope: Scope, ...rest: unknown[]) => {
              const docs = (await call(scope, ...rest)) as T[];
              if (reads.watched(scope)) reads.docs += docs.length;
              return docs;
            };
          case "page":
            return async (scope: Scope, ...rest: unknown[]) => {
              const page = (await call(scope, ...rest)) as { items: T[]; total: number };
              if (reads.watched(scope)) {
                reads.docs += page.items.length;
                reads.counts.push({ collection: target.name, matched: page.total });
              }
              return page;
            };
          case "count":
            return async (scope: Scope, filter: unknown, options?: { limit?: number }) => {
              const n = (await call(scope, filter, options)) as number;
              if (reads.watched(scope)) reads.counts.push({ collection: target.name, matched: n, limit: options?.limit });
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

const HOUR = 3_600_000;
/** A long analytics window: day rows inside it, hour rows at its ends. */
const EIGHTY_DAYS_AGO = new Date(Date.now() - 80 * 24 * HOUR).toISOString();

let dir: string;
let inner: SqliteStore;
let broker: ServiceBroker;
let baseUrl: string;
let rx: Receiver;
const reads = new Reads();
/** Every SQL statement the store ran while a measured request was in flight. */
const statements = new Set<string>();
let org: Bootstrap["org"];
let key: string;
let ok: { id: string };
let broken: { id: string };
let wf: { id: string };
let bulkJob: { id: string };
let emitted = 0;
/** The first event stored: its deliveries are read by event id. */
let anEvent = "";

const call = (method: string, path: string, body?: unknown) => api(baseUrl, method, path, { key, body });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wfp-bounded-"));
  inner = new SqliteStore(dir);
  const prepare = inner.statement.bind(inner);
  // Every argument passed on: the wrapper only watches.
  inner.statement = (...args: Parameters<SqliteStore["statement"]>) => {
    if (reads.active) statements.add(args[0]);
    return prepare(...args);
  };
  const settings = loadSettings({
    DATA_DIR: dir,
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "false",
    RATE_LIMIT_MAX: "1000000",
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WEBHOOK_TIMEOUT_MS: "2000",
    WEBHOOK_RETRY_DELAYS_MS: "10,10,10,10",
  });
  broker = createBroker(settings, {}, countingStore(inner, reads));
  await broker.start();
  const gateway = broker.getLocalService("gateway") as unknown as { server: { address(): { port: number } } };
  baseUrl = `http://127.0.0.1:${gateway.server.address().port}/v1`;
  rx = await startReceiver();

  const made = await broker.call<Bootstrap, { name: string }>("orgs.create", { name: "Bounded" });
  org = made.org;
  key = made.api_keys.find((k) => k.environment === "live")!.key;
  reads.org = org.id;
  const okHook = (await call("POST", "/webhooks", { url: rx.url("/ok"), events: ["load.tick"] })).body.data;
  rx.setSecret("/ok", okHook.secret);
  // Fails every attempt: ten deliveries in a row fail and it is disabled (deliveries `failed`).
  const brokenHook = (await call("POST", "/webhooks", { url: rx.url("/broken"), events: ["load.tick"] })).body.data;
  rx.behave("/broken", () => ({ status: 503 }));
  ok = okHook;
  broken = brokenHook;
  wf = (
    await call("POST", "/workflows", {
      name: "on tick",
      trigger: { type: "event", event_type: "load.tick" },
      steps: [{ type: "delay", duration_ms: 1 }],
    })
  ).body.data;
  const idle = await call("POST", "/workflows", {
    name: "idle",
    status: "inactive",
    trigger: { type: "manual" },
    steps: [{ type: "delay", duration_ms: 1 }],
  });
  // A bulk job (over the idle workflow's runs: none), read back by id and in the list.
  bulkJob = (await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: idle.body.data.id } })).body.data;
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await rx?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Stores events until there are `total`, then waits until each is delivered and its run has ended. */
async function growTo(total: number): Promise<void> {
  const tenant = { org_id: org.id, environment: "live" as const };
  while (emitted < total) {
    const batch = Math.min(100, total - emitted);
    await Promise.all(
      Array.from({ length: batch }, (_, i) =>
        broker.call(
          "events.emit",
          { type: "load.tick", data: { i: emitted + i } },
          { meta: { auth: { ...tenant, key_id: "key_load", scopes: [] } } },
        ),
      ),
    );
    emitted += batch;
  }
  const deliveries = inner.collection<Doc & { status: string }>("webhook_deliveries");
  const runs = inner.collection<Doc & { status: string }>("workflow_runs");
  await eventuallyValue(
    `every delivery and run of ${total} settled ([delivered, pending, runs ended])`,
    () =>
      Promise.all([
        deliveries.count(tenant, { webhook_id: ok.id, status: "succeeded" }),
        deliveries.count(tenant, { status: "pending" }),
        runs.count(tenant, { workflow_id: wf.id, status: "succeeded" }),
      ]),
    ([delivered, pending, ended]) => delivered === total && pending === 0 && ended === total,
    120_000,
    100,
  );
  // The outcome counters are written at the end of the turn that counted them.
  const settled = await deliveries.count(tenant, {});
  await waitFor("the outcome counters to hold every settled delivery and ended run", async () => {
    const hooks = await openCollection(inner, WEBHOOK_OUTCOMES).find(tenant, { period: "hour" });
    const runRows = await openCollection(inner, RUN_OUTCOMES).find(tenant, { period: "hour", workflow_id: wf.id });
    return (
      hooks.reduce((n, r) => n + (r.succeeded ?? 0) + (r.failed ?? 0), 0) === settled &&
      runRows.reduce((n, r) => n + (r.succeeded ?? 0), 0) === total
    );
  });
}

/** The lists and analytics a client reads, as paths. */
const PATHS = () => [
  "/events",
  "/events?type=load.tick",
  "/events?type=load.tick&page=3&per_page=50",
  "/events?type=load.tick&limit=10",
  "/events/types",
  "/webhooks",
  "/webhooks?status=enabled",
  "/webhooks?status=disabled",
  `/webhooks/${ok.id}/deliveries`,
  `/webhooks/${ok.id}/deliveries?status=succeeded`,
  `/webhooks/${ok.id}/deliveries?status=failed`,
  `/webhooks/${broken.id}/deliveries?status=failed`,
  `/webhooks/${ok.id}/deliveries?event_type=load.tick`,
  `/webhooks/${ok.id}/deliveries?event_type=load.tick&status=succeeded`,
  `/webhooks/${ok.id}/deliveries?created_after=${EIGHTY_DAYS_AGO}&created_before=2100-01-01T00:00:00Z`,
  `/webhooks/${ok.id}/deliveries?created_after=${EIGHTY_DAYS_AGO}&event_type=load.tick&limit=10`,
  `/webhooks/${ok.id}/deliveries?event_id=${anEvent}`,
  `/events/${anEvent}/deliveries`,
  "/workflows",
  "/workflows?status=active",
  "/workflows?trigger_event_type=load.tick",
  "/workflows?trigger_event_type=load.tick&status=active",
  `/workflows/${wf.id}/runs`,
  `/workflows/${wf.id}/runs?status=succeeded`,
  `/workflows/${wf.id}/runs?status=failed&per_page=100`,
  // A run's children, through the sparse index of child runs (none here: the runs grown are not children).
  `/runs?parent_run_id=run_0000000000000000000000000a`,
  `/runs?parent_run_id=run_0000000000000000000000000a&status=succeeded&limit=10`,
  // One step's children in item order, through the step-children index.
  `/runs?parent_run_id=run_0000000000000000000000000a&step_id=each`,
  `/runs?parent_run_id=run_0000000000000000000000000a&step_id=each&status=failed&limit=10`,
  "/runs/bulk",
  `/runs/bulk/${bulkJob.id}`,
  "/api-keys",
  `/orgs/${org.id}/members`,
  "/analytics/webhooks",
  "/analytics/workflows",
  `/analytics/webhooks?from=${EIGHTY_DAYS_AGO}`,
  `/analytics/workflows?from=${EIGHTY_DAYS_AGO}`,
  "/analytics/usage",
  "/analytics/usage?granularity=day&group_by=route",
];

interface Measured {
  docs: number;
  counts: Reads["counts"];
  body: any;
}

/** One request through the gateway, and what the store read for it (the fewer of two tries: a background read may land in one). */
async function measure(path: string): Promise<Measured> {
  let best: Measured | undefined;
  for (let i = 0; i < 2; i++) {
    reads.docs = 0;
    reads.counts = [];
    reads.active = true;
    const res = await call("GET", path);
    reads.active = false;
    expect({ path, status: res.status }).toEqual({ path, status: 200 });
    if (!best || reads.docs < best.docs) best = { docs: reads.docs, counts: reads.counts, body: res.body };
  }
  return best!;
}

async function measureAll(): Promise<Map<string, Measured>> {
  const out = new Map<string, Measured>();
  for (const path of PATHS()) out.set(path, await measure(path));
  return out;
}

describe("bounded reads", () => {
  it("reads as many documents per request at 2,000 events as at 200, and counts totals through bounded counts", async () => {
    await growTo(200);
    anEvent = (await call("GET", "/events?type=load.tick&limit=1&ending_before=evt_0")).body.data[0].id;
    const startedAt = Date.now();
    const small = await measureAll();
    await growTo(2000);
    const big = await measureAll();
    // An hour that began in between adds one counter row per webhook and workflow to the analytics.
    const newHour = Math.floor(startedAt / HOUR) !== Math.floor(Date.now() / HOUR);

    const table = PATHS().map((path) => ({
      path,
      at200: small.get(path)!.docs,
      at2000: big.get(path)!.docs,
      counted: big.get(path)!.counts.map((c) => c.matched),
    }));
    console.log(
      `documents read per request:\n${table.map((r) => `  ${r.path}: ${r.at200} → ${r.at2000} (counts matched: ${r.counted.join(", ") || "none"})`).join("\n")}`,
    );
    for (const { path, at200, at2000 } of table) {
      if (path.startsWith("/analytics/usage")) {
        // Usage rows are the gateway's metered requests (rows per second and route), not the events,
        // deliveries and runs grown here: at most the first round's requests add to them.
        expect(at2000).toBeLessThanOrEqual(at200 + 2 * PATHS().length);
      } else if (newHour && path.startsWith("/analytics/")) {
        expect(at2000).toBeLessThanOrEqual(at200 + 3);
      } else {
        expect({ path, docs: at2000 }).toEqual({ path, docs: at200 });
      }
      // Nothing reads more than a page: a page is at most 100 items, plus the resource it hangs on.
      expect({ path, bounded: at2000 <= 150 }).toEqual({ path, bounded: true });
    }
    // Every total came from a count that stops at MAX_COUNTED + 1, never from a full count.
    for (const m of big.values()) for (const c of m.counts) expect(c).toMatchObject({ limit: MAX_COUNTED + 1 });

    // Totals stay exact below the cap.
    expect(big.get("/events?type=load.tick")!.body.meta).toEqual({ total: 2000, page: 1, per_page: 20 });
    expect(big.get("/events?type=load.tick&limit=10")!.body.meta).toEqual({ total: 2000, limit: 10, has_more: true });
    expect(big.get(`/workflows/${wf.id}/runs?status=succeeded`)!.body.meta.total).toBe(2000);
    expect(big.get(`/webhooks/${ok.id}/deliveries?status=succeeded`)!.body.meta.total).toBe(2000);
    expect(big.get(`/webhooks/${ok.id}/deliveries?status=failed`)!.body.meta.total).toBe(0);
    expect(big.get(`/webhooks/${ok.id}/deliveries?event_type=load.tick&status=succeeded`)!.body.meta.total).toBe(2000);
    expect(big.get(`/webhooks/${ok.id}/deliveries?event_id=${anEvent}`)!.body.data).toHaveLength(1);
    expect(big.get(`/events/${anEvent}/deliveries`)!.body.meta.total).toBe(2);
    // The analytics agree with the logs. On a busy machine an attempt can outlast its time-out and
    // be tried again, so the attempts counted are those the delivery log holds.
    const logged = await inner
      .collection<Doc & { attempts: unknown[] }>("webhook_deliveries")
      .find({ org_id: org.id, environment: "live" }, { webhook_id: ok.id }, { limit: 5000 });
    expect(logged).toHaveLength(2000);
    const hooks = big.get("/analytics/webhooks")!.body.data;
    expect(hooks.webhooks.find((w: any) => w.webhook_id === ok.id)).toMatchObject({
      total: 2000,
      by_status: { succeeded: 2000, pending: 0 },
      attempt_counts: { total: logged.reduce((n, d) => n + d.attempts.length, 0), succeeded: 2000 },
    });
    const runs = big.get("/analytics/workflows")!.body.data;
    expect(runs.workflows.find((w: any) => w.workflow_id === wf.id)).toMatchObject({
      total: 2000,
      by_status: { succeeded: 2000 },
      success_rate: 1,
    });
  }, 240_000);

  it("bulk jobs over the grown runs read them along an index (their statements join the plans checked next)", async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    reads.active = true;
    try {
      // By workflow and status (no failed runs: one batch), and by a creation time range alone.
      for (const body of [
        { action: "retry", filter: { workflow_id: wf.id, status: "failed" } },
        { action: "cancel", filter: { created_after: since } },
      ]) {
        let job = (await call("POST", "/runs/bulk", body)).body.data;
        expect(job).toMatchObject({ object: "bulk_job", total: 0 });
        await waitFor(`bulk job ${job.id} to end`, async () => {
          job = (await call("GET", `/runs/bulk/${job.id}`)).body.data;
          return job.status === "succeeded";
        });
        expect(job).toMatchObject({ matched: 0, done: 0 });
      }
    } finally {
      reads.active = false;
    }
    // A batch by workflow and status reads along the index with the status: only failed runs, not
    // the 2,000 that succeeded (with both ends of the id range given, SQLite would take the other).
    const batch = [...statements].filter((sql) =>
      /FROM "workflow_runs" WHERE "c_workflow_id" = \? AND "c_status" = \? .*ORDER BY id ASC/.test(sql),
    );
    expect(batch.length).toBeGreaterThan(0);
    const db = new DatabaseSync(join(dir, DATABASE_FILE), { readOnly: true });
    try {
      for (const sql of batch)
        expect((db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join(" | ")).toContain(
          "c_status=?",
        );
    } finally {
      db.close();
    }
  });

  it("serves every query of those requests from an index, without sorting (EXPLAIN QUERY PLAN)", () => {
    const db = new DatabaseSync(join(dir, DATABASE_FILE), { readOnly: true });
    try {
      const reads = [...statements].filter((sql) => /^\s*SELECT/i.test(sql));
      expect(reads.length).toBeGreaterThan(10);
      const bad: { sql: string; plan: string }[] = [];
      for (const sql of reads) {
        const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail);
        // A full pass over a table (or over a whole index), or a sort of what was found, grows with the data.
        const scans = plan.filter((d) => /^SCAN /.test(d) && !/^SCAN (\(subquery|CONSTANT ROW|json_each)/.test(d));
        if (scans.length > 0 || plan.some((d) => d.includes("TEMP B-TREE"))) bad.push({ sql, plan: plan.join(" | ") });
        if (process.env.SHOW_PLANS) console.log(`${sql}\n  ${plan.join(" | ")}`);
      }
      expect(bad).toEqual([]);
    } finally {
      db.close();
    }
  });

  it("caps totals past 10,000 and pages beyond them by cursor, reading one page", async () => {
    // 10,050 events of another organization, stored directly (nothing to deliver or trigger).
    const other = await broker.call<Bootstrap, { name: string }>("orgs.create", { name: "Big" });
    const otherKey = other.api_keys.find((k) => k.environment === "live")!.key;
    const events: Collection<EventDoc> = openCollection(inner, EVENTS);
    const base = Date.now() - 60_000;
    const docs = Array.from({ length: 10_050 }, (_, i) => {
      const {
        undispatched_since: _u,
        untriggered_since: _t,
        ...doc
      } = eventDoc({ org_id: other.org.id, environment: "live", type: "bulk.row", data: { i }, source: "api" }, base + i);
      return doc;
    });
    await Promise.all(docs.map((d) => events.insert(d)));
    const get = (path: string) => api(baseUrl, "GET", path, { key: otherKey });

    reads.org = other.org.id;
    // The key's first request resolves it (its organization is read once, then cached).
    await get("/events?per_page=1");
    reads.docs = 0;
    reads.counts = [];
    reads.active = true;
    const first = await get("/events?type=bulk.row&per_page=100");
    reads.active = false;
    expect(first.body.meta).toEqual({ total: MAX_COUNTED, total_capped: true, page: 1, per_page: 100 });
    expect(reads.docs).toBe(100);
    expect(reads.counts).toEqual([{ collection: "events", matched: MAX_COUNTED + 1, limit: MAX_COUNTED + 1 }]);

    // Page numbers reach the first 10,000; beyond, the cursor.
    expect((await get("/events?type=bulk.row&per_page=100&page=100")).status).toBe(200);
    const tooDeep = await get("/events?type=bulk.row&per_page=100&page=101");
    expect({ status: tooDeep.status, param: tooDeep.body.error?.param }).toEqual({ status: 400, param: "page" });
    let after: string | undefined;
    let seen = 0;
    for (;;) {
      const page = await get(`/events?type=bulk.row&limit=100${after ? `&starting_after=${after}` : ""}`);
      expect(page.status).toBe(200);
      seen += page.body.data.length;
      if (!page.body.meta.has_more) break;
      after = page.body.data[page.body.data.length - 1].id;
    }
    expect(seen).toBe(10_050);
    // Back one page from the oldest: the 100 before it, newest first.
    const oldest = docs[0].id;
    const back = await get(`/events?type=bulk.row&limit=100&ending_before=${oldest}`);
    expect(back.body.data.map((e: any) => e.id)).toEqual(
      docs
        .slice(1, 101)
        .map((d) => d.id)
        .reverse(),
    );
    expect(back.body.meta).toMatchObject({ has_more: true, limit: 100 });
    const both = await get(`/events?starting_after=${oldest}&ending_before=${oldest}`);
    expect({ status: both.status, param: both.body.error?.param }).toEqual({ status: 400, param: "ending_before" });
    const mixed = await get(`/events?starting_after=${oldest}&page=2`);
    expect({ status: mixed.status, param: mixed.body.error?.param }).toEqual({ status: 400, param: "page" });
  }, 120_000);
});
