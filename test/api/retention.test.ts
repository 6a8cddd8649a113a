import { createServer, type Server } from "node:http";
import { ulid } from "ulid";
import { ALWAYS_KEPT_BYTES, PREVIEW_MAX_BYTES, RUN_OUTPUTS_MAX_BYTES, STEP_OUTPUT_MAX_BYTES } from "../../services/workflows/outputs";
import { DELIVERIES, type DeliveryDoc } from "../../shared/records/deliveries";
import { EVENTS, type EventDoc } from "../../shared/records/events";
import { openStore } from "../../shared/storage";
import type { SqliteStore } from "../../shared/storage/sqlite";
import { ALL_TENANTS, openCollection, type Collection, type Doc, type Store } from "../../shared/storage/types";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

/**
 * Retention (EVENT_RETENTION_DAYS, 30 by default) and the bounds on a run's stored outputs, through
 * the gateway. Old data is made the way it ages: documents inserted through the platform's own store
 * with ids and times of 40 days ago.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20" });

const DAY = 24 * 60 * 60 * 1000;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

let rx: Receiver;
/** http steps' target: `/json/<bytes>` answers a JSON object of that many bytes; `/echo` records bodies. */
let target: { server: Server; url: string; echoed: string[] };
let store: Store;
let events: Collection<EventDoc>;
let deliveries: Collection<DeliveryDoc>;
let runs: Collection<Doc & Record<string, any>>;

const jsonOf = (bytes: number) => {
  const head = '{"id":"big","pad":"';
  return `${head}${"p".repeat(bytes - head.length - 2)}"}`;
};

beforeAll(async () => {
  rx = await startReceiver();
  const echoed: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const size = /^\/json\/(\d+)$/.exec(req.url ?? "");
      // With its length declared: an answer cut at the read cap still shows its whole size.
      if (size) {
        const json = jsonOf(Number(size[1]));
        return res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) }).end(json);
      }
      echoed.push(body);
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  target = { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, echoed };
  // The platform's own store (one per DATA_DIR in a process): aged documents go in as they would have.
  store = openStore({ dataDir: suite.p.dataDir, mongoUrl: undefined });
  events = openCollection(store, EVENTS);
  deliveries = openCollection(store, DELIVERIES);
  runs = store.collection("workflow_runs");
});
afterAll(async () => {
  await store?.close();
  target.server.closeAllConnections();
  await new Promise((ok) => target.server.close(ok));
  await rx.close();
});

const idAt = (prefix: string, ms: number) => `${prefix}_${ulid(ms).toLowerCase()}`;
const iso = (ms: number) => new Date(ms).toISOString();
const tenant = () => ({ org_id: suite.acme.org.id, environment: "live" as const });

function agedEvent(ms: number, type = "order.aged"): EventDoc {
  return { id: idAt("evt", ms), ...tenant(), type, data: { aged: true }, source: "api", created_at: iso(ms) };
}

function agedDelivery(ms: number, webhookId: string, event: EventDoc, status: DeliveryDoc["status"]): DeliveryDoc {
  return {
    id: idAt("del", ms),
    ...tenant(),
    webhook_id: webhookId,
    event_id: event.id,
    event_type: event.type,
    status,
    attempts: [{ number: 1, at: iso(ms), status_code: status === "succeeded" ? 200 : 500, duration_ms: 3, error: null }],
    series_start: 0,
    next_attempt_at: status === "pending" ? iso(Date.now() + 3_600_000) : null,
    created_at: iso(ms),
    updated_at: iso(ms),
    // Pending, due in an hour: no dispatcher takes it during the test.
    ...(status === "pending" && { due_at: Date.now() + 3_600_000 }),
  };
}

/** A run of `workflowId` (whose one step is an approval), created at `createdMs`, ended at `finishedMs` or waiting. */
function agedRun(workflowId: string, createdMs: number, finishedMs: number | null, event?: EventDoc) {
  const step = { id: "step_1", type: "approval", message: null };
  return {
    id: idAt("run", createdMs),
    ...tenant(),
    workflow_id: workflowId,
    workflow_version: 1,
    status: finishedMs === null ? "waiting" : "succeeded",
    input: {},
    steps: [
      {
        id: "step_1",
        type: "approval",
        status: finishedMs === null ? "waiting" : "succeeded",
        output: finishedMs === null ? null : { approved: true },
        error: null,
        attempts: 0,
        started_at: iso(createdMs),
        finished_at: finishedMs === null ? null : iso(finishedMs),
      },
    ],
    trigger: event ? { type: "event", event_id: event.id, event_type: event.type } : { type: "manual" },
    created_at: iso(createdMs),
    updated_at: iso(finishedMs ?? createdMs),
    finished_at: finishedMs === null ? null : iso(finishedMs),
    definition: [step],
    cursor: finishedMs === null ? 0 : 1,
    rev: 3,
    outbox: [],
    ...(event && { trigger_key: `${workflowId}/${event.id}` }),
  };
}

async function workflow(body: Record<string, unknown>): Promise<string> {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, ...body });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

const until = <T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs = 10_000): Promise<T> =>
  eventuallyValue("the condition", read, check, timeoutMs, 25);

const ended = (wf: string, run: string, timeoutMs?: number) =>
  until(
    async () => (await call("GET", `/workflows/${wf}/runs/${run}`)).body.data,
    (r) => ["succeeded", "failed", "cancelled"].includes(r.status),
    timeoutMs,
  );

const status = async (path: string) => (await call("GET", path)).status;

/** The SQL the store prepares while `fn` runs, with SQLite's plan for each statement on the pruned tables. */
async function plansOf(fn: () => Promise<unknown>): Promise<{ sql: string; plan: string[] }[]> {
  const sqlite = (store.collection("events") as unknown as { store: SqliteStore }).store;
  const seen = new Set<string>();
  const statement = sqlite.statement.bind(sqlite);
  // Every argument passed on: the wrapper only watches.
  sqlite.statement = (...args: Parameters<SqliteStore["statement"]>) => (seen.add(args[0]), statement(...args));
  try {
    await fn();
  } finally {
    sqlite.statement = statement;
  }
  return [...seen]
    .filter((sql) => /"(events|webhook_deliveries|workflow_runs)"/.test(sql))
    .map((sql) => ({ sql, plan: (sqlite.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((row) => row.detail) }));
}

describe("retention", () => {
  const old = Date.now() - 40 * DAY;
  let hook: string;
  let wf: string;
  const made = {} as Record<string, any>;

  beforeAll(async () => {
    const res = await call("POST", "/webhooks", { url: rx.url("/all"), events: ["*"] });
    expect(res.status).toBe(201);
    hook = res.body.data.id;
    rx.setSecret("/all", res.body.data.secret);
    wf = await workflow({ steps: [{ type: "delay", duration_ms: 1 }] });
  });

  it("prunes old events, settled deliveries and finished runs through indexes; keeps the recent, the pending, the unfinished and what they need", async () => {
    // Recent: an event emitted now and its delivery, a run that has ended.
    const recent = (await call("POST", "/events", { type: "order.recent", data: {} })).body.data;
    const recentRun = (await call("POST", `/workflows/${wf}/runs`, {})).body.data;
    await ended(wf, recentRun.id);
    const recentDelivery = await until(
      async () => (await call("GET", `/webhooks/${hook}/deliveries?per_page=100`)).body.data.find((d: any) => d.event_id === recent.id),
      (d) => d?.status === "succeeded",
    );

    // 40 days old: an event nothing needs; one a pending delivery still sends; one an unfinished run started from.
    made.event = agedEvent(old);
    made.eventPending = agedEvent(old + 1);
    made.eventRun = agedEvent(old + 2);
    made.delivery = agedDelivery(old + 10, hook, made.event, "succeeded");
    made.failedDelivery = agedDelivery(old + 11, hook, made.eventRun, "failed");
    made.pendingDelivery = agedDelivery(old + 12, hook, made.eventPending, "pending");
    made.run = agedRun(wf, old + 20, old + 30);
    made.lateRun = agedRun(wf, old + 21, Date.now() - DAY);
    made.waitingRun = agedRun(wf, old + 22, null, made.eventRun);
    for (const e of [made.event, made.eventPending, made.eventRun]) await events.insert(e);
    for (const d of [made.delivery, made.failedDelivery, made.pendingDelivery]) await deliveries.insert(d);
    for (const r of [made.run, made.lateRun, made.waitingRun]) await runs.insert(r);
    for (const e of [made.event, made.eventPending, made.eventRun]) expect(await status(`/events/${e.id}`)).toBe(200);
    expect(await status(`/webhooks/${hook}/deliveries/${made.delivery.id}`)).toBe(200);
    expect(await status(`/workflows/${wf}/runs/${made.run.id}`)).toBe(200);

    const counts: Record<string, number> = {};
    const plans = await plansOf(async () => {
      counts.events = await suite.p.broker.call("events.prune");
      counts.deliveries = await suite.p.broker.call("webhook-dispatcher.prune");
      counts.runs = await suite.p.broker.call("workflows.prune");
    });
    expect(counts).toEqual({ events: 1, deliveries: 2, runs: 1 });

    // Gone from gets and lists.
    expect(await status(`/events/${made.event.id}`)).toBe(404);
    expect(await status(`/webhooks/${hook}/deliveries/${made.delivery.id}`)).toBe(404);
    expect(await status(`/webhooks/${hook}/deliveries/${made.failedDelivery.id}`)).toBe(404);
    expect(await status(`/workflows/${wf}/runs/${made.run.id}`)).toBe(404);
    const eventIds = (await call("GET", "/events?per_page=100")).body.data.map((e: any) => e.id);
    const deliveryIds = (await call("GET", `/webhooks/${hook}/deliveries?per_page=100`)).body.data.map((d: any) => d.id);
    const runIds = (await call("GET", `/workflows/${wf}/runs?per_page=100`)).body.data.map((r: any) => r.id);
    expect(eventIds).not.toContain(made.event.id);
    expect(deliveryIds).not.toContain(made.delivery.id);
    expect(runIds).not.toContain(made.run.id);

    // Kept: the recent, the pending delivery and its event, the unfinished run and its event, the
    // run created long ago that ended yesterday.
    expect(eventIds).toEqual(expect.arrayContaining([recent.id, made.eventPending.id, made.eventRun.id]));
    expect(deliveryIds).toEqual(expect.arrayContaining([recentDelivery.id, made.pendingDelivery.id]));
    expect(runIds).toEqual(expect.arrayContaining([recentRun.id, made.lateRun.id, made.waitingRun.id]));
    expect((await call("GET", `/webhooks/${hook}/deliveries/${made.pendingDelivery.id}`)).body.data.status).toBe("pending");
    expect((await call("GET", `/workflows/${wf}/runs/${made.waitingRun.id}`)).body.data.status).toBe("waiting");

    // Every statement of the passes on these tables reads through an index: no table scan.
    const pruning = plans.filter(({ sql }) => /^DELETE|OFFSET|event_id/.test(sql));
    expect(pruning.filter(({ sql }) => sql.startsWith("DELETE")).length).toBe(3);
    const scans = plans.filter(({ plan }) => plan.some((detail) => /^SCAN (?!json_each)/.test(detail)));
    expect(scans).toEqual([]);
    for (const { sql, plan } of pruning)
      expect({ sql, plan: plan.join("; ") }).toEqual({ sql, plan: expect.stringMatching(/(SEARCH|USING).*INDEX/) });
  });

  it("two passes at once (two nodes) delete each old document once, batch after batch", async () => {
    const many = Array.from({ length: 1250 }, (_, i) => agedEvent(old - DAY + i, "order.bulk"));
    await Promise.all(many.map((e) => events.insert(e)));
    const before = (await call("GET", "/events?type=order.bulk")).body.meta.total;
    expect(before).toBe(many.length);
    const now = Date.now();
    const passes = await Promise.all([0, 1, 2].map(() => suite.p.broker.call<number, { now: number }>("events.prune", { now })));
    expect(passes.reduce((a, b) => a + b, 0)).toBe(many.length);
    expect((await call("GET", "/events?type=order.bulk")).body.meta.total).toBe(0);
    // What the first test kept is still kept.
    expect(await status(`/events/${made.eventPending.id}`)).toBe(200);
    expect(await status(`/events/${made.eventRun.id}`)).toBe(200);
  });

  it("what the platform itself wrote ages the same way: a pass as of 31 days from now", async () => {
    // A run waiting for approval, started by an event; a delivery still retrying (its receiver fails).
    const approver = await workflow({ trigger: { type: "event", event_type: "order.placed" }, steps: [{ type: "approval" }] });
    const failing = (await call("POST", "/webhooks", { url: rx.url("/failing"), events: ["order.failing"] })).body.data;
    rx.behave("/failing", () => ({ status: 500 }));
    const placed = (await call("POST", "/events", { type: "order.placed", data: {} })).body.data;
    const stuck = (await call("POST", "/events", { type: "order.failing", data: {} })).body.data;
    const waiting = await until(
      async () => (await call("GET", `/workflows/${approver}/runs`)).body.data[0],
      (r) => r?.status === "waiting",
    );
    const retrying = await until(
      async () => (await call("GET", `/webhooks/${failing.id}/deliveries`)).body.data[0],
      (d) => d?.attempts.length === 1,
    );
    expect(retrying.status).toBe("pending");
    // Every other delivery has settled (approval.requested went to the "*" webhook).
    await until(
      async () => (await call("GET", `/webhooks/${hook}/deliveries?status=pending&per_page=100`)).body.data.map((d: any) => d.id),
      (ids) => ids.length === 1 && ids[0] === made.pendingDelivery.id,
    );

    const now = Date.now() + 31 * DAY;
    const counts = {
      events: await suite.p.broker.call<number, { now: number }>("events.prune", { now }),
      deliveries: await suite.p.broker.call<number, { now: number }>("webhook-dispatcher.prune", { now }),
      runs: await suite.p.broker.call<number, { now: number }>("workflows.prune", { now }),
    };
    expect(counts.events).toBeGreaterThan(3);
    expect(counts.deliveries).toBeGreaterThan(1);
    expect(counts.runs).toBeGreaterThan(1);

    const left = (await call("GET", "/events?per_page=100")).body.data.map((e: any) => e.id).sort();
    expect(left).toEqual([placed.id, stuck.id, made.eventPending.id, made.eventRun.id].sort());
    expect((await call("GET", `/webhooks/${failing.id}/deliveries`)).body.data.map((d: any) => d.id)).toEqual([retrying.id]);
    expect((await call("GET", `/webhooks/${hook}/deliveries?per_page=100`)).body.data.map((d: any) => d.id)).toEqual([
      made.pendingDelivery.id,
    ]);
    expect((await call("GET", `/workflows/${approver}/runs`)).body.data.map((r: any) => r.id)).toEqual([waiting.id]);
    expect((await call("GET", `/workflows/${wf}/runs?per_page=100`)).body.data.map((r: any) => r.id)).toEqual([made.waitingRun.id]);

    // Once the run ends, a pass takes it and its event.
    expect((await call("POST", `/workflows/${approver}/runs/${waiting.id}/approve`)).status).toBe(200);
    await ended(approver, waiting.id);
    expect(await suite.p.broker.call("workflows.prune", { now })).toBe(1);
    expect(await suite.p.broker.call("events.prune", { now })).toBeGreaterThanOrEqual(1);
    expect(await status(`/events/${placed.id}`)).toBe(404);
  });
});

describe("a run's stored outputs are bounded", () => {
  /** The run as stored, and its size in bytes as JSON. */
  async function stored(runId: string) {
    const doc = await runs.get(ALL_TENANTS, runId);
    return { doc: doc as any, bytes: Buffer.byteLength(JSON.stringify(doc)) };
  }

  it("50 http steps answered 200 KiB of JSON each: every output is a marker, the run stays small and its page is served", async () => {
    const answer = 200 * 1024;
    const wf = await workflow({
      steps: Array.from({ length: 50 }, () => ({ type: "http", method: "GET", url: `${target.url}/json/${answer}` })),
    });
    const started = (await call("POST", `/workflows/${wf}/runs`, {})).body.data;
    const run = await ended(wf, started.id, 30_000);
    expect(run.status).toBe("succeeded");
    expect(run.steps).toHaveLength(50);
    for (const step of run.steps) {
      expect(step).toMatchObject({
        status: "succeeded",
        output: { status_code: 200, truncated: true, size: answer, preview: expect.any(String) },
      });
      expect(jsonOf(answer).startsWith(step.output.preview)).toBe(true);
      expect(step.output.preview.length).toBeGreaterThan(PREVIEW_MAX_BYTES / 2);
      expect(step.output.body).toBeUndefined();
    }
    const { bytes } = await stored(started.id);
    expect(bytes).toBeLessThan(50 * ALWAYS_KEPT_BYTES + 32 * 1024);
    const page = await call("GET", `/workflows/${wf}/runs/${started.id}`);
    expect(page.status).toBe(200);
    expect(page.body.data.steps[49].output.truncated).toBe(true);
  });

  it("50 http steps answered 60 KiB each: outputs are kept until the run holds its bound, then stored as markers", async () => {
    const answer = 60 * 1024;
    const wf = await workflow({
      steps: Array.from({ length: 50 }, () => ({ type: "http", method: "GET", url: `${target.url}/json/${answer}` })),
    });
    const started = (await call("POST", `/workflows/${wf}/runs`, {})).body.data;
    const run = await ended(wf, started.id, 30_000);
    expect(run.status).toBe("succeeded");
    const kept = Math.floor(RUN_OUTPUTS_MAX_BYTES / (answer + 40));
    run.steps.forEach((step: any, i: number) => {
      if (i < kept) expect(step.output).toEqual({ status_code: 200, body: JSON.parse(jsonOf(answer)) });
      else expect(step.output).toMatchObject({ status_code: 200, truncated: true, size: answer });
    });
    const { doc, bytes } = await stored(started.id);
    const outputs = doc.steps.reduce((sum: number, s: any) => sum + Buffer.byteLength(JSON.stringify(s.output)), 0);
    expect(outputs).toBeLessThanOrEqual(RUN_OUTPUTS_MAX_BYTES + 50 * ALWAYS_KEPT_BYTES);
    expect(bytes).toBeLessThan(RUN_OUTPUTS_MAX_BYTES + 50 * ALWAYS_KEPT_BYTES + 64 * 1024);
    const page = await call("GET", `/workflows/${wf}/runs/${started.id}`);
    expect(page.status).toBe(200);
    expect(Buffer.byteLength(JSON.stringify(page.body))).toBeLessThan(1024 * 1024);
  });

  it("a template reading into a truncated output fails its step, saying why; the marker's fields can be read", async () => {
    const big = `${target.url}/json/${STEP_OUTPUT_MAX_BYTES + 1}`;
    const wf = await workflow({
      steps: [
        { id: "fetch", type: "http", method: "GET", url: big },
        {
          id: "report",
          type: "http",
          url: `${target.url}/echo`,
          body: {
            code: "{{steps.fetch.output.status_code}}",
            cut: "{{steps.fetch.output.truncated}}",
            size: "{{steps.fetch.output.size}}",
          },
        },
        { id: "use", type: "http", url: `${target.url}/echo`, body: { id: "{{steps.fetch.output.body.id}}" } },
        { id: "after", type: "delay", duration_ms: 1 },
      ],
    });
    target.echoed.length = 0;
    const started = (await call("POST", `/workflows/${wf}/runs`, {})).body.data;
    const run = await ended(wf, started.id);
    expect(run.status).toBe("failed");
    expect(run.steps.map((s: any) => s.status)).toEqual(["succeeded", "succeeded", "failed", "skipped"]);
    expect(run.steps[2].error).toMatch(
      /\{\{steps\.fetch\.output\.body\.id\}\} reads the output of step 'fetch', which was not stored whole/,
    );
    expect(target.echoed.map((b) => JSON.parse(b))).toEqual([{ code: 200, cut: true, size: STEP_OUTPUT_MAX_BYTES + 1 }]);
  });
});
