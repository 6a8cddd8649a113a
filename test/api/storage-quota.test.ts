import { statfsSync } from "node:fs";
import { join } from "node:path";
import {
  STORAGE_COUNTING_SERVICES,
  STORAGE_POLICIES,
  storageUsageSpec,
  storedSize,
  tenantOf,
  usageId,
} from "../../shared/records/storage-quota";
import { ALL_TENANTS, openCollection, openStore, type Doc, type Store } from "../../shared/storage";
import { api, expectError, startPlatform, type Platform, type TestOrg } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { mountTmpfs } from "../helpers/tmpfs";
import { eventuallyValue } from "../../tools/eventually";

/**
 * The storage quota (issue 29): bytes per organization and environment, kept as data is written.
 * On a real 16 MB tmpfs with STORAGE_QUOTA_BYTES at 2 MB, one tenant writing as fast as it can is
 * stopped by its quota (400 quota_exceeded naming storage_bytes and its limit) long before the
 * disk fills: every other tenant's writes, its own other environment and everyone's reads go on.
 * Deletes and retention give space back; the counter equals the sum of the tenant's documents'
 * sizes (read back from the store), and so it is after a restart.
 */
const fs = mountTmpfs("16m", "quota");
if (fs.skipReason) console.warn(`SKIPPED test/api/storage-quota.test.ts: ${fs.skipReason}`);
const DATA_DIR = join(fs.dir, "data");
const LIMIT = 2 * 1024 * 1024;
const ENV = {
  DATA_DIR,
  STORAGE_QUOTA_BYTES: String(LIMIT),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_RETRY_DELAYS_MS: "200,200,200,200",
};
const BLOB = "x".repeat(60_000);

(fs.skipReason ? describe.skip : describe)("the storage quota on a small disk (tmpfs)", () => {
  let p: Platform | undefined;
  let acme: TestOrg;
  let globex: TestOrg;
  let store: Store;
  let rx: Receiver;

  const as = (key: string) => (method: string, path: string, body?: unknown) => api((p as Platform).baseUrl, method, path, { key, body });
  /** The tenant's counters, one row per service, summed. */
  async function counter(org: TestOrg, environment: "live" | "test" = "live"): Promise<number> {
    const tenant = { org_id: org.org.id, environment };
    let total = 0;
    for (const service of STORAGE_COUNTING_SERVICES)
      total += (await openCollection(store, storageUsageSpec(service)).get(tenant, usageId(tenant)))?.bytes ?? 0;
    return total;
  }
  /** What the counter should say: the sizes of the tenant's documents, read back from every counted collection. */
  async function measured(org: TestOrg, environment: "live" | "test" = "live"): Promise<number> {
    let total = 0;
    for (const [name, policy] of Object.entries(STORAGE_POLICIES)) {
      const docs = await store.collection<Doc>(name).find(ALL_TENANTS, { org_id: org.org.id });
      for (const doc of docs) {
        if (tenantOf(doc as unknown as Record<string, unknown>)?.environment === environment)
          total += storedSize(doc as unknown as Record<string, unknown>, policy.volatile);
      }
    }
    return total;
  }

  /**
   * The counter once it equals what the documents measure: changes no check waits for (runs,
   * deliveries, audit entries) are stored within 100 ms of their documents.
   */
  const settled = async (org: TestOrg, environment: "live" | "test" = "live"): Promise<number> =>
    (
      await eventuallyValue(
        "the counter to equal the documents' sizes",
        async () => ({ counted: await counter(org, environment), measured: await measured(org, environment) }),
        (v) => v.counted === v.measured,
        5000,
      )
    ).counted;

  beforeAll(async () => {
    rx = await startReceiver();
    // The first attempt of each delivery fails: each is claimed, settled and retried (its updates counted).
    rx.behave("/hook", (n) => ({ status: n % 2 === 1 ? 500 : 200 }));
    p = await startPlatform(ENV);
    acme = await p.createOrg("Acme");
    globex = await p.createOrg("Globex");
    store = openStore({ dataDir: DATA_DIR, mongoUrl: undefined });
  }, 20_000);

  afterAll(async () => {
    await store?.close();
    await p?.stop();
    await rx?.close();
    fs.unmount();
  }, 20_000);

  let accepted = 0;
  let hookId: string;

  it("a tenant writing as fast as it can is stopped at its quota, the disk far from full", async () => {
    const acmeLive = as(acme.live);
    const hook = await acmeLive("POST", "/webhooks", {
      url: "http://127.0.0.1:9/hook",
      events: ["never.sent"],
      description: "d".repeat(500),
    });
    expect(hook.status).toBe(201);
    hookId = hook.body.data.id;
    // Ten at a time: concurrent writers are held to the quota too (the counter's condition is in the write).
    let refused: Awaited<ReturnType<typeof acmeLive>> | undefined;
    while (!refused) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => acmeLive("POST", "/events", { type: "blob.stored", data: { blob: BLOB } })),
      );
      for (const res of answers) {
        if (res.status === 201) accepted += 1;
        else refused ??= res;
      }
      expect(accepted).toBeLessThan(100);
    }
    expectError(refused, 400, "quota_exceeded");
    expect(refused.body.error.message).toContain("storage_bytes");
    expect(refused.body.error.message).toContain(`at most ${LIMIT} bytes`);
    // Each event is about 60 KB: the quota took about LIMIT / 60 KB of them, and never more than fit.
    expect(accepted).toBeGreaterThanOrEqual(Math.floor(LIMIT / 62_000) - 2);
    const bytes = await settled(acme);
    expect(bytes).toBeLessThanOrEqual(LIMIT);
    expect(bytes).toBeGreaterThan(LIMIT - 62_000);
    const free = statfsSync(fs.dir);
    expect(free.bavail * free.bsize).toBeGreaterThan(4 * 1024 * 1024);
  }, 60_000);

  it("other tenants and the tenant's other environment still write; everyone's reads are served", async () => {
    expect((await as(globex.live)("POST", "/events", { type: "blob.stored", data: { blob: BLOB } })).status).toBe(201);
    expect((await as(acme.test)("POST", "/events", { type: "blob.stored", data: { blob: BLOB } })).status).toBe(201);
    const acmeLive = as(acme.live);
    // A workflow bigger than the room left is refused as well (every collection the API creates in is checked).
    const room = LIMIT - (await counter(acme));
    const big = { id: "tell", type: "emit", event_type: "order.held", data: { blob: "x".repeat(room) } };
    expectError(await acmeLive("POST", "/workflows", { name: "w", trigger: { type: "manual" }, steps: [big] }), 400, "quota_exceeded");
    for (const path of ["/events", "/webhooks", "/api-keys", "/workflows", "/secrets", "/analytics/usage", `/orgs/${acme.org.id}/members`])
      expect({ path, status: (await acmeLive("GET", path)).status }).toEqual({ path, status: 200 });
    await settled(globex);
    await settled(acme, "test");
  }, 20_000);

  it("runs and deliveries change their tenant's counter by exactly what each of their updates changes", async () => {
    const globexLive = as(globex.live);
    const hook = await globexLive("POST", "/webhooks", { url: rx.url("/hook"), events: ["order.created"] });
    expect(hook.status).toBe(201);
    rx.setSecret("/hook", hook.body.data.secret);
    const wf = await globexLive("POST", "/workflows", {
      name: "counted",
      trigger: { type: "event", event_type: "order.created" },
      steps: [
        { id: "call", type: "http", method: "POST", url: rx.url("/step"), timeout_ms: 2000 },
        { id: "tell", type: "emit", event_type: "order.told", data: { path: "{{steps.call.output.status_code}}" } },
      ],
    });
    expect(wf.status).toBe(201);
    for (let i = 0; i < 3; i += 1) expect((await globexLive("POST", "/events", { type: "order.created", data: { i } })).status).toBe(201);
    await eventuallyValue(
      "every run ended (its http step answered 400: unsigned) and every delivery succeeded",
      async () => ({
        runs: (await globexLive("GET", `/workflows/${wf.body.data.id}/runs`)).body.data as { finished_at: string | null }[],
        deliveries: (await globexLive("GET", `/webhooks/${hook.body.data.id}/deliveries`)).body.data as { status: string }[],
      }),
      ({ runs, deliveries }) =>
        runs.length === 3 &&
        runs.every((r) => r.finished_at) &&
        deliveries.length === 3 &&
        deliveries.every((d) => d.status === "succeeded"),
      20_000,
    );
    await settled(globex);
  }, 30_000);

  it("a delete gives its bytes back at once; retention gives back the rest", async () => {
    const acmeLive = as(acme.live);
    const before = await settled(acme);
    // Deleting is never refused at the quota (its audit entry and event are counted, not checked).
    expect((await acmeLive("DELETE", `/webhooks/${hookId}`)).status).toBe(200);
    const after = await counter(acme);
    expect(after).toBeLessThan(before);
    await settled(acme);
    // A small write fits in what the delete gave back.
    if (LIMIT - after > 300) expect((await acmeLive("POST", "/events", { type: "small.one", data: {} })).status).toBe(201);
    // Retention prunes the events (as of a time past their retention): the space returns.
    await (p as Platform).broker.call("events.prune", { now: Date.now() + 400 * 24 * 3600 * 1000 });
    const pruned = await settled(acme);
    expect(pruned).toBeLessThan(LIMIT / 4);
    expect((await acmeLive("POST", "/events", { type: "blob.stored", data: { blob: BLOB } })).status).toBe(201);
  }, 30_000);

  it("after a restart the counter is what the documents measure, and the quota still holds", async () => {
    const bytes = await settled(acme);
    await store.close();
    await (p as Platform).stop();
    p = undefined;
    p = await startPlatform(ENV);
    store = openStore({ dataDir: DATA_DIR, mongoUrl: undefined });
    expect(await counter(acme)).toBe(bytes);
    expect(await measured(acme)).toBe(bytes);
    const acmeLive = as(acme.live);
    let refused = false;
    for (let i = 0; i < 60 && !refused; i += 1) {
      const res = await acmeLive("POST", "/events", { type: "blob.stored", data: { blob: BLOB } });
      if (res.status !== 201) {
        expectError(res, 400, "quota_exceeded");
        refused = true;
      }
    }
    expect(refused).toBe(true);
    expect(await settled(acme)).toBeLessThanOrEqual(LIMIT);
  }, 60_000);
});

describe("the storage quota and runs started through the API", () => {
  const QUOTA = 300_000;
  let p: Platform;
  let org: TestOrg;
  beforeAll(async () => {
    p = await startPlatform({ STORAGE_QUOTA_BYTES: String(QUOTA) });
    org = await p.createOrg("Runs");
  });
  afterAll(() => p?.stop());

  it("refuses a run once its tenant stores its quota (a run's own writes are counted, not checked)", async () => {
    const call = (method: string, path: string, body?: unknown) => api(p.baseUrl, method, path, { key: org.live, body });
    const wf = await call("POST", "/workflows", {
      name: "big inputs",
      trigger: { type: "manual" },
      steps: [{ type: "delay", duration_ms: 1 }],
    });
    expect(wf.status).toBe(201);
    // A run accepted before the quota fills, waiting for a person; it emits an event once approved.
    const held = await call("POST", "/workflows", {
      name: "held",
      trigger: { type: "manual" },
      steps: [
        { id: "ok", type: "approval" },
        { id: "tell", type: "emit", event_type: "order.released", data: { n: "{{input.n}}" } },
      ],
    });
    expect(held.status).toBe(201);
    const waiting = await call("POST", `/workflows/${held.body.data.id}/runs`, { input: { n: 7 } });
    expect(waiting.status).toBe(201);
    const input = { blob: "x".repeat(20_000) };
    let started = 0;
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    for (let i = 0; i < 60 && !refused; i += 1) {
      const res = await call("POST", `/workflows/${wf.body.data.id}/runs`, { input });
      if (res.status === 201) started += 1;
      else refused = res;
    }
    if (!refused) throw new Error(`${started} runs of 20 KB started under a quota of ${QUOTA} bytes`);
    expectError(refused, 400, "quota_exceeded");
    expect(refused.body.error.message).toContain("storage_bytes");
    // Each start reads the counters and what this node has counted and not stored yet: the runs
    // started stop within about one run of the quota.
    expect(started).toBeGreaterThanOrEqual(Math.floor(QUOTA / 25_000));
    expect(started).toBeLessThanOrEqual(Math.ceil(QUOTA / 20_000) + 1);
    // Reads are served, and the test environment is not held back.
    expect((await call("GET", `/workflows/${wf.body.data.id}/runs`)).status).toBe(200);
    expect((await api(p.baseUrl, "POST", "/events", { key: org.test, body: { type: "small.one", data: {} } })).status).toBe(201);

    // At the quota a client's event is refused, but the accepted run goes on: approved, it ends
    // and its emitted event is stored (counted, not checked).
    // (The events service reads the workflows service's counter at most once a second.)
    const refusedEvent = await eventuallyValue(
      "a client's event to be refused",
      () => call("POST", "/events", { type: "order.sent", data: {} }),
      (res) => res.status !== 201,
    );
    expectError(refusedEvent, 400, "quota_exceeded");
    const runPath = `/workflows/${held.body.data.id}/runs/${waiting.body.data.id}`;
    expect((await call("POST", `${runPath}/approve`, {})).status).toBe(200);
    const ended = await eventuallyValue(
      "the held run to end",
      async () => (await call("GET", runPath)).body.data,
      (run) => run.status !== "running",
    );
    expect(ended.status).toBe("succeeded");
    const told = await call("GET", "/events?type=order.released");
    expect(told.body.data.map((e: { data: unknown }) => e.data)).toEqual([{ n: 7 }]);
  }, 60_000);
});
