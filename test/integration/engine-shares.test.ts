import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceBroker } from "moleculer";
import { RunEngine } from "../../services/workflows/engine";
import type { RunDoc } from "../../services/workflows/run-doc";
import { newRun } from "../../services/workflows/runs.logic";
import type { WorkflowDoc } from "../../services/workflows/workflows.logic";
import { STORE } from "../../services/workflows/workflows.store";
import type { PublishedEvent } from "../../shared/records/events";
import { SqliteStore } from "../../shared/storage/sqlite";
import { ALL_TENANTS, openCollection, type Collection, type Environment } from "../../shared/storage/types";
import { waitFor } from "../../tools/procs";

/**
 * The engine's shares (services/workflows/tenant-slots.ts) on a real store: one tenant's runs wait
 * on a server that does not answer, woken all at once; they never hold more than the tenant's
 * share, and another tenant's runs, woken or only stored due behind them, are driven meanwhile.
 */
const SHARES = { total: 8, perOrg: 6, perEnvironment: 4 };

let dir: string;
let store: SqliteStore;
let runs: Collection<RunDoc>;
let broker: ServiceBroker;
let server: Server;
let url: string;
const held = new Set<ServerResponse>();
const most = new Map<string, number>();
const answered: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wfp-shares-"));
  store = new SqliteStore(dir);
  runs = openCollection(store, STORE.owns.runs);
  broker = new ServiceBroker({ logger: false });
  broker.createService({
    name: "events",
    actions: { publish: (ctx: { params: { events: PublishedEvent[] } }) => ctx.params.events.map((e) => e.id) },
  });
  await broker.start();
  // `/hold/<tenant>` is held until the test ends, counted per tenant; anything else answers at once.
  server = createServer((req, res) => {
    req.resume();
    const path = req.url ?? "";
    if (!path.startsWith("/hold/")) {
      answered.push(path);
      return res.writeHead(200, { "content-type": "application/json" }).end("{}");
    }
    held.add(res);
    const tenant = path.slice("/hold/".length);
    const now = [...held].filter((r) => (r as ServerResponse & { tenant?: string }).tenant === tenant).length + 1;
    (res as ServerResponse & { tenant?: string }).tenant = tenant;
    most.set(tenant, Math.max(most.get(tenant) ?? 0, now));
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const res of held) res.writeHead(200).end("{}");
  server.closeAllConnections();
  await new Promise((ok) => server.close(ok));
  await broker.stop();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function runOf(org_id: string, environment: Environment, path: string): RunDoc {
  const at = new Date().toISOString();
  const wf: WorkflowDoc = {
    id: `wf_${org_id}`,
    org_id,
    environment,
    name: "w",
    description: null,
    status: "active",
    trigger: { type: "manual" },
    steps: [{ id: "call", type: "http", method: "GET", url: `${url}${path}`, headers: {}, body: null, timeout_ms: 60_000, retries: 0 }],
    version: 1,
    created_at: at,
    updated_at: at,
  };
  return { ...newRun(wf, {}, { type: "manual" }, Date.now()), due_at: Date.now() };
}

describe("the engine's shares", () => {
  it("hold a tenant woken all at once to its share, and drive the others' runs meanwhile, woken or found", async () => {
    const logger = { warn: jest.fn(), error: jest.fn(), info: jest.fn(), debug: jest.fn(), trace: jest.fn(), fatal: jest.fn() };
    const engine = new RunEngine({
      runs,
      workflows: store.collection<WorkflowDoc>("workflows"),
      secretValues: () => Promise.resolve({}),
      broker,
      logger: logger as unknown as ServiceBroker["logger"],
      allowPrivate: true,
      retryBaseMs: 50,
      maxActive: SHARES.total,
      shares: SHARES,
    });
    const hog = { org_id: "org_hog", environment: "live" } as const;
    const hogRuns = Array.from({ length: 20 }, () => runOf(hog.org_id, hog.environment, "/hold/hog-live"));
    const hogTest = Array.from({ length: 5 }, () => runOf(hog.org_id, "test", "/hold/hog-test"));
    for (const run of [...hogRuns, ...hogTest]) await runs.insert(run);
    // Woken together, before any claim is back from the store.
    for (const run of hogRuns) engine.wake(run.id, hog);
    await waitFor("the hog's live environment to hold its share", () => (most.get("hog-live") ?? 0) >= SHARES.perEnvironment);
    // Stored due behind the hog's backlog, never woken: found by the poll.
    const quiet = runOf("org_quiet", "live", "/quiet");
    await runs.insert(quiet);
    const woken = runOf("org_woken", "live", "/woken");
    await runs.insert(woken);
    engine.wake(woken.id, { org_id: "org_woken", environment: "live" });
    engine.start();
    try {
      await waitFor("the other tenants' runs", () => answered.includes("/quiet") && answered.includes("/woken"));
      await waitFor("the hog's test environment to take the rest of its organization's share", () => (most.get("hog-test") ?? 0) >= 2);
      await waitFor("the quiet tenant's run to succeed", async () => (await runs.get(ALL_TENANTS, quiet.id))?.status === "succeeded");
      expect(Object.fromEntries(most)).toEqual({ "hog-live": SHARES.perEnvironment, "hog-test": SHARES.perOrg - SHARES.perEnvironment });
    } finally {
      for (const res of held) res.writeHead(200, { "content-type": "application/json" }).end("{}");
      held.clear();
      await engine.stop();
    }
  });
});
