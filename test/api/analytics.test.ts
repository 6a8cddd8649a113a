import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_TIMEOUT_MS: "300",
  WEBHOOK_RETRY_DELAYS_MS: "20,20,20,20",
  WORKFLOW_RETRY_BASE_MS: "10",
});
let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(() => rx.close());

const call = (method: string, path: string, key: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key, body });
async function key(owner: string, scopes: string[]) {
  const res = await call("POST", "/api-keys", owner, { name: scopes.join(" "), scopes });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; key: string };
}
/** Usage as the analytics reader sees it, once the gateways' meters have flushed (every second). */
async function usage(reader: string, query: string, settle: (body: any) => boolean = () => true) {
  const res = await eventuallyValue(
    "the usage to settle",
    () => call("GET", `/analytics/usage?${query}`, reader),
    (r) => r.status !== 200 || settle(r.body.data),
    6000,
  );
  expect(res.status).toBe(200);
  return res.body.data;
}
const sum = (buckets: any[], field: string, value: unknown, what: "count" | "errors" = "count") =>
  buckets.filter((b) => b[field] === value).reduce((n, b) => n + b[what], 0);

describe("usage analytics", () => {
  it("counts a known mix of requests exactly, per route, status and key, and per organization", async () => {
    const { acme, globex } = suite;
    const writer = await key(acme.live, ["events:write", "workflows:read"]);
    const reader = await key(acme.live, ["analytics:read"]);
    const globexReader = await key(globex.live, ["analytics:read"]);
    for (let i = 0; i < 5; i++) expect((await call("GET", "/workflows", writer.key)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await call("GET", "/workflows/wf_nope", writer.key)).status).toBe(404);
    for (let i = 0; i < 2; i++) expect((await call("POST", "/events", writer.key, { type: "a.b" })).status).toBe(201);
    expect((await call("POST", "/events", writer.key, { type: "Bad Type" })).status).toBe(400);
    expect((await call("GET", "/api-keys", writer.key)).status).toBe(403);
    for (let i = 0; i < 4; i++) expect((await call("GET", "/events", globex.live)).status).toBe(200);

    const byKey = await usage(reader.key, "group_by=key", (d) => sum(d.buckets, "key_id", writer.id) === 12);
    expect(sum(byKey.buckets, "key_id", writer.id)).toBe(12);
    expect(sum(byKey.buckets, "key_id", writer.id, "errors")).toBe(5);

    const byRoute = (await usage(reader.key, "group_by=route")).buckets;
    expect(sum(byRoute, "route", "GET /workflows")).toBe(5);
    expect(sum(byRoute, "route", "GET /workflows/{id}")).toBe(3);
    expect(sum(byRoute, "route", "GET /workflows/{id}", "errors")).toBe(3);
    expect(sum(byRoute, "route", "POST /events")).toBe(3);
    expect(sum(byRoute, "route", "POST /events", "errors")).toBe(1);
    expect(sum(byRoute, "route", "GET /api-keys")).toBe(1);
    // Globex's requests are Globex's only.
    expect(sum(byRoute, "route", "GET /events")).toBe(0);
    const theirs = await usage(globexReader.key, "group_by=route", (d) => sum(d.buckets, "route", "GET /events") === 4);
    expect(sum(theirs.buckets, "route", "GET /events")).toBe(4);
    expect(sum(theirs.buckets, "route", "GET /workflows")).toBe(0);

    const byStatus = (await usage(reader.key, "group_by=status")).buckets;
    expect(sum(byStatus, "status", 404)).toBe(3);
    expect(sum(byStatus, "status", 400)).toBe(1);
    expect(sum(byStatus, "status", 403)).toBe(1);

    // Plain hourly buckets over the last day: 24 or 25 of them, this hour's holding everything.
    const plain = await usage(reader.key, "granularity=hour");
    expect(plain.buckets.length).toBeGreaterThanOrEqual(24);
    const now = plain.buckets[plain.buckets.length - 1];
    expect(now.count).toBeGreaterThanOrEqual(12);
    expect(now.p50_ms).toEqual(expect.any(Number));
    expect(now.p95_ms).toBeGreaterThanOrEqual(now.p50_ms);
    expect(plain.buckets[0]).toMatchObject({ count: 0, errors: 0, p50_ms: null, p95_ms: null });
    const daily = await usage(reader.key, "granularity=day&from=2026-01-01&to=2026-01-03");
    expect(daily.buckets).toEqual([
      { start: "2026-01-01T00:00:00.000Z", count: 0, errors: 0, p50_ms: null, p95_ms: null },
      { start: "2026-01-02T00:00:00.000Z", count: 0, errors: 0, p50_ms: null, p95_ms: null },
    ]);
  });

  it("loses no count while the analytics service is away, and stores a batch sent twice once", async () => {
    const { acme } = suite;
    const writer = await key(acme.test, ["events:read"]);
    const reader = await key(acme.test, ["analytics:read"]);
    const broker = suite.p.broker;
    const analytics = broker.getLocalService("analytics")!;
    await broker.destroyService(analytics);
    for (let i = 0; i < 7; i++) expect((await call("GET", "/events", writer.key)).status).toBe(200);
    // The gateway's meter flushes every second: once a flush has failed, the counts wait in a kept batch.
    const gateway = broker.getLocalService("gateway") as unknown as { meter: { backlog: number } };
    await waitFor("a meter flush while the analytics service is away (a batch kept)", () => gateway.meter.backlog > 0, 5000);
    broker.createService(analytics.originalSchema);
    await broker.waitForServices(["analytics"]);
    const counted = await usage(reader.key, "group_by=key", (d) => sum(d.buckets, "key_id", writer.id) === 7);
    expect(sum(counted.buckets, "key_id", writer.id)).toBe(7);

    const batch = {
      batch_id: "ub_test_1",
      rows: [
        {
          minute: Date.now() - (Date.now() % 60_000),
          org_id: acme.org.id,
          environment: "test",
          key_id: "key_replayed",
          method: "GET",
          route: "/events",
          status: 200,
          count: 4,
          errors: 0,
          latency_ms_sum: 8,
          hist: [0, 4],
        },
      ],
    };
    expect(await broker.call("analytics.ingest", batch)).toBe(1);
    expect(await broker.call("analytics.ingest", batch)).toBe(0);
    const again = await usage(reader.key, "group_by=key");
    expect(sum(again.buckets, "key_id", "key_replayed")).toBe(4);
    expect(again.buckets.find((b: any) => b.key_id === "key_replayed")).toMatchObject({ p50_ms: 2, p95_ms: 2 });
  });

  it("rolls minutes up into hours and days, and every answer stays the same", async () => {
    const { globex } = suite;
    const reader = await key(globex.test, ["analytics:read"]);
    const HOUR = 3_600_000;
    const now = Date.now();
    const base = now - (now % HOUR) - 3 * 24 * HOUR;
    const rows = [];
    for (let h = 0; h < 60; h += 7) {
      for (const [m, status, lat] of [
        [1, 200, 1],
        [17, 200, 4],
        [59, 500, 9],
        [30, 404, 2],
      ] as const) {
        const hist = new Array(25).fill(0);
        hist[lat] = 3;
        rows.push({
          minute: base + h * HOUR + m * 60_000,
          org_id: globex.org.id,
          environment: "test",
          key_id: "key_old",
          method: "GET",
          route: "/workflows/{id}",
          status,
          count: 3,
          errors: status >= 400 ? 3 : 0,
          latency_ms_sum: 30,
          hist,
        });
      }
    }
    expect(await suite.p.broker.call("analytics.ingest", { batch_id: "ub_rollup_1", rows })).toBe(rows.length);
    const from = new Date(base - 24 * HOUR).toISOString();
    // The window ends well before now: the reader's own (metered) questions stay out of it.
    const to = new Date(base + 60 * HOUR).toISOString();
    const ask = async () => ({
      hourly: (await usage(reader.key, `from=${from}&to=${to}&granularity=hour&group_by=status`)).buckets,
      daily: (await usage(reader.key, `from=${from}&to=${to}&granularity=day&group_by=route`)).buckets,
      plain: (await usage(reader.key, `from=${from}&to=${to}&granularity=day`)).buckets,
    });
    const before = await ask();
    expect(before.plain.reduce((n: number, b: any) => n + b.count, 0)).toBe(rows.length * 3);

    // Hours fold, minute rows older than two days go: the answers do not change.
    const first: any = await suite.p.broker.call("analytics.maintain", { now });
    expect(first.folded).toBeGreaterThan(60);
    expect(first.pruned).toBeGreaterThan(0);
    expect(await ask()).toEqual(before);
    // Again: nothing new to fold, nothing counted twice.
    expect(await suite.p.broker.call("analytics.maintain", { now })).toMatchObject({ folded: 0 });
    expect(await ask()).toEqual(before);

    // Months later the hour rows are gone too; the days still answer, with the same totals.
    await suite.p.broker.call("analytics.maintain", { now: now + 95 * 24 * HOUR });
    const later = (await usage(reader.key, `from=${from}&to=${to}&granularity=day`)).buckets;
    expect(later).toEqual(before.plain);
  }, 60_000);

  it("refuses bad windows, naming the parameter", async () => {
    const reader = (await key(suite.acme.live, ["analytics:read"])).key;
    const bad: [string, string][] = [
      ["from=2026-11-20&to=2026-11-10", "from"],
      ["from=2026-01-01&to=2026-06-01", "from"],
      ["from=yesterday", "from"],
      ["to=2026-13-45", "to"],
      ["to=2026-11-20T10:00:00", "to"],
      ["granularity=week", "granularity"],
      ["group_by=colour", "group_by"],
      ["colour=red", "colour"],
    ];
    for (const [query, param] of bad) {
      const res = await call("GET", `/analytics/usage?${query}`, reader);
      expect({ query, status: res.status, param: res.body.error?.param }).toEqual({ query, status: 400, param });
    }
    expectError(await call("GET", "/analytics/workflows?from=2026-11-20&to=2026-11-10", reader), 400, "parameter_invalid", "from");
    // Another last character (a key that ends in "x" already must not stay the same key).
    const wrong = suite.acme.live.slice(0, -1) + (suite.acme.live.endsWith("x") ? "y" : "x");
    expectError(await call("GET", "/analytics/usage", wrong), 401, "invalid_api_key");
    const noScope = (await key(suite.acme.live, ["events:read"])).key;
    expectError(await call("GET", "/analytics/usage", noScope), 403, "insufficient_scope");
  });
});

describe("run and delivery outcomes", () => {
  it("counts runs that ended by status, per workflow, with the success rate", async () => {
    const { acme } = suite;
    const wf = (
      await call("POST", "/workflows", acme.live, {
        name: "ok",
        trigger: { type: "manual" },
        steps: [{ type: "emit", event_type: "x.done" }],
      })
    ).body.data;
    const bad = (
      await call("POST", "/workflows", acme.live, {
        name: "bad",
        trigger: { type: "manual" },
        steps: [{ type: "http", url: "http://127.0.0.1:1/" }],
      })
    ).body.data;
    const slow = (
      await call("POST", "/workflows", acme.live, {
        name: "slow",
        trigger: { type: "manual" },
        steps: [{ type: "delay", duration_ms: 60_000 }],
      })
    ).body.data;
    for (let i = 0; i < 2; i++) await call("POST", `/workflows/${wf.id}/runs`, acme.live, {});
    await call("POST", `/workflows/${bad.id}/runs`, acme.live, {});
    const waiting = (await call("POST", `/workflows/${slow.id}/runs`, acme.live, {})).body.data;
    await waitFor(
      "the slow run waiting in its delay",
      async () => (await call("GET", `/workflows/${slow.id}/runs/${waiting.id}`, acme.live)).body.data.status === "waiting",
      5000,
    );
    expect((await call("POST", `/workflows/${slow.id}/runs/${waiting.id}/cancel`, acme.live)).status).toBe(200);
    const body = await eventuallyValue(
      "four runs counted",
      async () => (await call("GET", "/analytics/workflows", acme.live)).body.data,
      (b) => b.total >= 4,
      5000,
    );
    expect(body).toMatchObject({ total: 4, by_status: { succeeded: 2, failed: 1, cancelled: 1 }, success_rate: 0.5 });
    expect(body.workflows.find((w: any) => w.workflow_id === wf.id)).toMatchObject({ total: 2, success_rate: 1 });
    expect(body.workflows.find((w: any) => w.workflow_id === bad.id)).toMatchObject({
      total: 1,
      by_status: { failed: 1 },
      success_rate: 0,
    });
    expect((await call("GET", "/analytics/workflows", suite.globex.live)).body.data.total).toBe(0);
  });

  it("counts deliveries by status and their attempts, per webhook", async () => {
    const { acme } = suite;
    const good = (await call("POST", "/webhooks", acme.test, { url: rx.url("/good"), events: ["d.count"] })).body.data;
    rx.setSecret("/good", good.secret);
    const broken = (await call("POST", "/webhooks", acme.test, { url: rx.url("/broken"), events: ["d.count"] })).body.data;
    rx.behave("/broken", () => ({ status: 503 }));
    await call("POST", "/events", acme.test, { type: "d.count" });
    const body = await eventuallyValue(
      "both deliveries settled",
      async () => (await call("GET", "/analytics/webhooks", acme.test)).body.data,
      (b) => b.by_status.pending === 0 && b.total >= 2,
      5000,
    );
    // One attempt succeeded, five failed (the broken endpoint's whole series).
    expect(body).toMatchObject({
      total: 2,
      by_status: { pending: 0, succeeded: 1, failed: 1 },
      attempt_counts: { total: 6, succeeded: 1, failed: 5 },
      success_rate: 0.1667,
      delivery_success_rate: 0.5,
    });
    expect(body.webhooks.find((w: any) => w.webhook_id === good.id)).toMatchObject({
      total: 1,
      success_rate: 1,
      attempt_counts: { total: 1 },
    });
    expect(body.webhooks.find((w: any) => w.webhook_id === broken.id)).toMatchObject({
      total: 1,
      success_rate: 0,
      attempt_counts: { failed: 5 },
    });
  });
});
