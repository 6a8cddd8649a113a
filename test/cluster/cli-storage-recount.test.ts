import type { ServiceSchema } from "moleculer";
import mongoose from "mongoose";
import { SERVICE_SCHEMAS } from "../../services";
import {
  STORAGE_POLICIES,
  storageUsageSpec,
  storedSize,
  tenantOf,
  usageId,
  type StorageUsageDoc,
} from "../../shared/records/storage-quota";
import { declarationOf } from "../../shared/runtime/store.mixin";
import { ALL_TENANTS, openCollection, openStore, type Doc, type Store } from "../../shared/storage";
import { cliRun, waitForServerMark } from "../../tools/procs";
import { eventuallyValue } from "../../tools/eventually";
import { freePort, runCli, startNode, tempDir, waitFor, waitForGateway, type NodeProc } from "../helpers/cluster";
import { api, expectError, testStore } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * `storage recount` as a process on a real store: a platform run stores data for two tenants and
 * is stopped; its counters are then damaged or removed in the store (as an upgrade from a version
 * without them, or a crash, leaves them); the command sets them back to exactly what the documents
 * measure, and a platform started again holds the quota at the right point. Under
 * `npm run test:mongo` the same on MongoDB.
 */
jest.setTimeout(180_000);

const dir = tempDir();
const STORE_ENV = { DATA_DIR: dir.path, ...testStore(dir.path) };
const mongo = STORE_ENV.MONGO_URL !== undefined;

/** The counted collections of each service that counts, from the services' store declarations. */
const COUNTING = Object.entries(SERVICE_SCHEMAS)
  .map(([service, schema]) => ({
    service,
    counted: (declarationOf(schema as Partial<ServiceSchema>)?.owns ?? []).filter((n) => n in STORAGE_POLICIES),
  }))
  .filter((s) => s.counted.length > 0);

type Counters = Record<string, Record<string, number>>;

/** What each service's counters should say: every document of its counted collections, measured afresh. */
async function measured(store: Store): Promise<Counters> {
  const out: Counters = {};
  for (const { service, counted } of COUNTING) {
    const sums: Record<string, number> = {};
    for (const name of counted)
      for (const doc of (await store.collection<Doc>(name).find(ALL_TENANTS, {})) as unknown as Record<string, unknown>[]) {
        const tenant = tenantOf(doc);
        if (tenant) sums[usageId(tenant)] = (sums[usageId(tenant)] ?? 0) + storedSize(doc, STORAGE_POLICIES[name].volatile);
      }
    out[service] = sums;
  }
  return out;
}

const usage = (store: Store, service: string) => openCollection(store, storageUsageSpec(service));

/** What each service's counter rows say (with `zeros`, also the rows at 0 the platform leaves when a tenant deletes all it had). */
async function stored(store: Store, zeros = false): Promise<Counters> {
  const out: Counters = {};
  for (const { service } of COUNTING) {
    const rows = await usage(store, service).find(ALL_TENANTS, {});
    out[service] = Object.fromEntries(rows.filter((r) => zeros || r.bytes !== 0).map((r) => [r.id, r.bytes]));
  }
  return out;
}

/** Both, from the store of the stopped platform. */
async function withStore<T>(work: (store: Store) => Promise<T>): Promise<T> {
  const store = openStore({ dataDir: dir.path, mongoUrl: STORE_ENV.MONGO_URL });
  try {
    await store.opened();
    return await work(store);
  } finally {
    await store.close();
  }
}

let server: NodeProc | undefined;
let rx: Receiver;
let gw: string;

async function start(extra: Record<string, string> = {}): Promise<NodeProc> {
  const port = await freePort();
  gw = `http://127.0.0.1:${port}/v1`;
  return (server = startNode("recount", { ...STORE_ENV, PORT: String(port), WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", ...extra }));
}
async function stop(): Promise<void> {
  await server?.kill();
  server = undefined;
}

const recount = (...args: string[]) => cliRun(["storage", "recount", ...args], STORE_ENV);
const jsonLines = (stdout: string): any[] =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

let acme: { org: string; key: string };
let globex: { org: string; key: string };

beforeAll(async () => {
  rx = await startReceiver();
  await start();
  const org = (name: string, environment: "live" | "test") => {
    const made = runCli(["orgs", "create", "--name", name], STORE_ENV);
    return { org: made.org.id, key: made.api_keys.find((k) => k.environment === environment)!.key };
  };
  acme = org("Acme", "live");
  globex = org("Globex", "test");
  await waitForGateway(gw, acme.key);
});

afterAll(async () => {
  await stop();
  await rx?.close();
  dir.remove();
  if (STORE_ENV.MONGO_URL) {
    const conn = await mongoose.createConnection(STORE_ENV.MONGO_URL, { serverSelectionTimeoutMS: 5000 }).asPromise();
    await conn.dropDatabase();
    await conn.close();
  }
});

describe("npm run cli -- storage recount", () => {
  let before: Counters;

  it("a platform run stores data of every kind for two tenants; the command refuses while it runs", async () => {
    const a = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
      api(gw, method, path, { key: acme.key, body, headers });
    const g = (method: string, path: string, body?: unknown) => api(gw, method, path, { key: globex.key, body });
    const hook = await a("POST", "/webhooks", { url: rx.url("/hook"), events: ["order.created"] });
    expect(hook.status).toBe(201);
    rx.setSecret("/hook", hook.body.data.secret);
    const wf = await a("POST", "/workflows", {
      name: "ship",
      trigger: { type: "manual" },
      steps: [{ id: "ship", type: "emit", event_type: "order.shipped", data: { order: "{{input.order}}" } }],
    });
    expect(wf.status).toBe(201);
    for (let i = 0; i < 3; i += 1) {
      const res = await a(
        "POST",
        "/events",
        { type: "order.created", data: { i, blob: "a".repeat(2000) } },
        { "Idempotency-Key": `k${i}` },
      );
      expect(res.status).toBe(201);
    }
    expect((await a("POST", "/events", { type: "note.added", data: {} })).status).toBe(201);
    for (const order of ["o_1", "o_2"])
      expect((await a("POST", `/workflows/${wf.body.data.id}/runs`, { input: { order } })).status).toBe(201);
    const gone = await g("POST", "/webhooks", { url: rx.url("/other"), events: ["x.y"] });
    expect((await g("DELETE", `/webhooks/${gone.body.data.id}`)).status).toBe(200);
    expect((await g("POST", "/api-keys", { name: "reader", scopes: ["events:read"] })).status).toBe(201);
    for (let i = 0; i < 2; i += 1) expect((await g("POST", "/events", { type: "note.added", data: { i } })).status).toBe(201);
    await eventuallyValue(
      "both runs ended and the three deliveries succeeded",
      async () => ({
        runs: (await a("GET", `/workflows/${wf.body.data.id}/runs`)).body.data as { finished_at: string | null }[],
        deliveries: (await a("GET", `/webhooks/${hook.body.data.id}/deliveries`)).body.data as { status: string }[],
      }),
      ({ runs, deliveries }) =>
        runs.length === 2 && runs.every((r) => r.finished_at) && deliveries.filter((d) => d.status === "succeeded").length === 3,
      30_000,
    );

    // With MongoDB no server leaves a mark the CLI could see (docs/security/storage-quota.md).
    if (!mongo) {
      await waitForServerMark(dir.path, server!);
      const res = recount();
      expect({ status: res.status, stdout: res.stdout }).toEqual({ status: 1, stdout: "" });
      expect(res.stderr).toMatch(/1 server\(s\) use DATA_DIR=.*: stop the platform first/);
    }
    await stop();
  });

  it("finds nothing to change on counters the platform kept, but rows at 0 to remove", async () => {
    before = await withStore(stored);
    expect(before).toEqual(await withStore(measured));
    expect(before.events[`${acme.org}:live`]).toBeGreaterThan(6000);
    const res = recount("--dry-run", "--json");
    expect(res.status).toBe(0);
    const lines = jsonLines(res.stdout);
    expect(lines.map((l) => l.service).sort()).toEqual(COUNTING.map((s) => s.service).sort());
    // Globex deleted its one webhook: the platform keeps its row, at 0.
    const globexTest = `${globex.org}:test`;
    expect((await withStore((store) => stored(store, true))).webhooks[globexTest]).toBe(0);
    expect(lines.flatMap((l) => l.changed)).toEqual([{ org_id: globex.org, environment: "test", before: 0, after: null, difference: 0 }]);
    expect(lines.every((l) => l.dry_run === true)).toBe(true);
  });

  it("puts removed, low, high and stale counters back to what the documents measure", async () => {
    const acmeLive = `${acme.org}:live`;
    const globexTest = `${globex.org}:test`;
    // An upgrade: one service's counters never existed. A crash: one row low, one high, one of a tenant with nothing left.
    await withStore(async (store) => {
      expect(await usage(store, "events").deleteMany(ALL_TENANTS, {})).toBeGreaterThanOrEqual(2);
      const tenantA = { org_id: acme.org, environment: "live" as const };
      const tenantG = { org_id: globex.org, environment: "test" as const };
      await usage(store, "webhook-dispatcher").update(tenantA, { id: acmeLive }, { $inc: { bytes: -500 } });
      await usage(store, "keys").update(tenantG, { id: globexTest }, { $inc: { bytes: 12_345 } });
      await usage(store, "webhooks").insert({
        id: "org_gone:live",
        org_id: "org_gone",
        environment: "live",
        bytes: 999,
      } as StorageUsageDoc);
    });

    // A service that starts on documents its counters know nothing of says so, once, naming the command.
    const node = await start();
    await waitForGateway(gw, acme.key);
    await waitFor("the warning", () => node.output().includes("storage recount"));
    const warnings = node.output().match(/storage_usage_events does not count/g) ?? [];
    expect(warnings).toHaveLength(1);
    expect(node.output()).toContain("events, event_types hold documents");
    expect(node.output()).toContain("'npm run cli -- storage recount' is run with the platform stopped");
    expect(node.output()).not.toMatch(/storage_usage_(keys|webhooks|orgs|gateway|workflows|webhook_dispatcher) does not count/);
    await stop();

    const res = recount("--json");
    expect(res.status).toBe(0);
    const changed = Object.fromEntries(jsonLines(res.stdout).map((l) => [l.service, l.changed]));
    const eventsCreated = Object.entries(before.events)
      .map(([id, bytes]) => ({ org_id: id.split(":")[0], environment: id.split(":")[1], before: null, after: bytes, difference: bytes }))
      .sort((x, y) => (`${x.org_id}:${x.environment}` < `${y.org_id}:${y.environment}` ? -1 : 1));
    expect(changed).toEqual({
      events: eventsCreated,
      "webhook-dispatcher": [
        {
          org_id: acme.org,
          environment: "live",
          before: before["webhook-dispatcher"][acmeLive] - 500,
          after: before["webhook-dispatcher"][acmeLive],
          difference: 500,
        },
      ],
      keys: [
        {
          org_id: globex.org,
          environment: "test",
          before: before.keys[globexTest] + 12_345,
          after: before.keys[globexTest],
          difference: -12_345,
        },
      ],
      webhooks: [
        { org_id: globex.org, environment: "test", before: 0, after: null, difference: 0 },
        { org_id: "org_gone", environment: "live", before: 999, after: null, difference: -999 },
      ].sort((x, y) => (x.org_id < y.org_id ? -1 : 1)),
      gateway: [],
      orgs: [],
      workflows: [],
    });
    const after = await withStore((store) => stored(store, true));
    expect(after).toEqual(await withStore(measured));
    expect(after).toEqual(before);
    // Set right, it stays so: a second run changes nothing, and says so.
    const again = recount();
    expect(again.status).toBe(0);
    expect(again.stdout).toContain("events: ");
    expect(again.stdout.match(/nothing to change/g)).toHaveLength(COUNTING.length);
  });

  it("after a restart, the quota holds where the documents put it", async () => {
    const counted = await withStore(stored);
    const acmeLive = `${acme.org}:live`;
    const total = Object.values(counted).reduce((sum, rows) => sum + (rows[acmeLive] ?? 0), 0);
    // Room for three events of 10 000 characters of data (each under 11 000 bytes stored), not four.
    await start({ STORAGE_QUOTA_BYTES: String(total + 36_000) });
    await waitForGateway(gw, acme.key);
    let accepted = 0;
    let refusal;
    for (let i = 0; i < 8 && !refusal; i += 1) {
      const res = await api(gw, "POST", "/events", { key: acme.key, body: { type: "note.added", data: { blob: "q".repeat(10_000) } } });
      if (res.status === 201) accepted += 1;
      else refusal = res;
    }
    expect(accepted).toBe(3);
    expectError(refusal!, 400, "quota_exceeded");
    await stop();
    const now = await withStore(stored);
    expect(now).toEqual(await withStore(measured));
    expect(Object.values(now).reduce((sum, rows) => sum + (rows[acmeLive] ?? 0), 0)).toBeLessThanOrEqual(total + 36_000);
  });
});
