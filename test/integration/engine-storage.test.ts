import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ServiceBroker } from "moleculer";
import { RunEngine } from "../../services/workflows/engine";
import { MAX_STALLS } from "../../services/workflows/run-moves.logic";
import type { RunDoc } from "../../services/workflows/run-doc";
import { newRun } from "../../services/workflows/runs.logic";
import type { Step, WorkflowDoc } from "../../services/workflows/workflows.logic";
import { ApiError } from "../../shared/errors";
import { eventDoc, EVENTS, type EventDoc, type PublishedEvent } from "../../shared/records/events";
import { SqliteStore } from "../../shared/storage/sqlite";
import { ALL_TENANTS, openCollection, type Collection, type Doc } from "../../shared/storage/types";
import { eventually, realTimePasses } from "../../tools/eventually";

/**
 * The run engine against a store whose writes fail with `storage_unavailable` (a full disk, as the
 * SQLite store reports it) in the ways a real disk cannot be made to fail on cue: the claim is
 * stored but the step's result is not, or the run is stored but its event is not. The events service,
 * the engine's neighbour at the broker, is a stub that stores what it is handed into the same store. No endless
 * retry: the run is given up after MAX_STALLS claims, failed with an error saying why; and a
 * failing claim neither crashes the process (an unhandled rejection) nor is retried every poll.
 * test/api/storage-full.test.ts does the same on a real full disk through the whole platform.
 */
const LEASE_MARGIN_MS = 150;
const full = () =>
  new ApiError("storage_unavailable", "The store could not complete the operation (the disk is full); nothing was changed, retry later", {
    retry_after: 1,
    reason: "the disk is full",
  });

/** `target`'s methods, with `fail(method, args)` deciding which calls throw a full disk instead. */
function failing<T extends Doc>(
  target: Collection<T>,
  fail: (method: string, args: unknown[]) => boolean,
  calls: string[] = [],
): Collection<T> {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        if (fail(String(prop), args)) return Promise.reject(full());
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });
}

const logger = () => ({ warn: jest.fn(), error: jest.fn(), info: jest.fn(), debug: jest.fn(), trace: jest.fn(), fatal: jest.fn() });
const messages = (fn: jest.Mock) => fn.mock.calls.map((c) => String(c[0]));

function workflowOf(steps: Step[]): WorkflowDoc {
  const at = new Date().toISOString();
  return {
    id: `wf_${Date.now()}${Math.random()}`,
    org_id: "org_1",
    environment: "live",
    name: "w",
    description: null,
    status: "active",
    trigger: { type: "manual" },
    steps,
    version: 1,
    created_at: at,
    updated_at: at,
  };
}

const until = async (check: () => Promise<boolean>, ms: number, what: string): Promise<void> => {
  await eventually(what, check, ms, 25);
};

let dir: string;
let store: SqliteStore;
let runs: Collection<RunDoc>;
let events: Collection<EventDoc>;
/** Which events the stub events service refuses to store (as a full disk). */
let refuseEvent: (event: PublishedEvent) => boolean = () => false;
let broker: ServiceBroker;
let server: Server;
let url: string;
const hits: string[] = [];
const engines: RunEngine[] = [];
const rejections: unknown[] = [];
const onRejection = (err: unknown) => void rejections.push(err);

beforeAll(async () => {
  process.on("unhandledRejection", onRejection);
  dir = mkdtempSync(join(tmpdir(), "wfp-eng-"));
  store = new SqliteStore(dir);
  runs = store.collection<RunDoc>("runs");
  events = openCollection(store, EVENTS);
  broker = new ServiceBroker({ logger: false });
  broker.createService({
    name: "events",
    actions: {
      async publish(ctx: { params: { events: PublishedEvent[] } }): Promise<string[]> {
        const stored: string[] = [];
        for (const event of ctx.params.events) {
          if (refuseEvent(event)) throw full();
          if (await events.get(ALL_TENANTS, event.id)) continue;
          await events.insert(eventDoc(event, Date.now()));
          stored.push(event.id);
        }
        return stored;
      },
    },
  });
  await broker.start();
  server = createServer((req, res) => {
    hits.push(req.url ?? "");
    req.resume().on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}'));
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

// Each test's engine stops with it: a healthy one left polling would take the next test's run.
afterEach(() => Promise.all(engines.splice(0).map((e) => e.stop())));

afterAll(async () => {
  await new Promise((ok) => server.close(ok));
  await broker.stop();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  process.off("unhandledRejection", onRejection);
});

function engine(o: { runs?: Collection<RunDoc>; log: ReturnType<typeof logger> }): RunEngine {
  const e = new RunEngine({
    runs: o.runs ?? runs,
    // Workflows without a signing secret (their requests go unsigned), steps without secrets.
    workflows: store.collection<WorkflowDoc>("workflows"),
    secretValues: () => Promise.resolve({}),
    broker,
    logger: o.log as unknown as ServiceBroker["logger"],
    allowPrivate: true,
    retryBaseMs: 50,
    maxActive: 8,
    leaseMarginMs: LEASE_MARGIN_MS,
  });
  engines.push(e);
  e.start();
  return e;
}

describe("run engine on a failing store", () => {
  it("an http step whose result is never stored is sent MAX_STALLS times, then the run fails saying why", async () => {
    const wf = workflowOf([
      { id: "call", type: "http", method: "POST", url: `${url}/lost`, headers: {}, body: null, timeout_ms: 200, retries: 0 },
    ]);
    const run = newRun(wf, {}, { type: "manual" }, Date.now());
    await runs.insert(run);
    // Every write of the step's answer fails; the claim and the "running" mark before the request are stored.
    const isResult = (method: string, args: unknown[]) => {
      const set = (args[2] as { $set?: { steps?: { output: unknown }[] } } | undefined)?.$set;
      return method === "update" && (set?.steps?.[0]?.output ?? null) !== null;
    };
    const log = logger();
    engine({ runs: failing(runs, isResult), log });

    await until(async () => (await runs.get(ALL_TENANTS, run.id))?.status === "failed", 10_000, "the run failed");
    const stored = (await runs.get(ALL_TENANTS, run.id)) as RunDoc;
    // One send per claim: the first and a re-send each time the claim lapsed, and no more.
    expect(hits.filter((h) => h === "/lost")).toHaveLength(MAX_STALLS);
    expect(stored.steps[0]).toMatchObject({ status: "failed", attempt_count: 0, output: null });
    expect(stored.steps[0].error).toBe(
      `the run stopped: its progress could not be stored in ${MAX_STALLS} tries in a row (the store failed, or the node driving it stopped); given up`,
    );
    expect(stored.stalls).toBeUndefined();
    // Its workflow.completed is published as usual once it has ended.
    await until(
      async () => (await events.find(ALL_TENANTS, { type: "workflow.completed", "data.run_id": run.id })).length === 1,
      3000,
      "workflow.completed",
    );
    // Logged once per kind of failure, not once per try.
    expect(messages(log.warn).filter((m) => m.startsWith("driving runs failed (storage_unavailable)"))).toHaveLength(1);
    expect(messages(log.error).some((m) => m.startsWith(`run ${run.id}: the run stopped: its progress could not be stored`))).toBe(true);
  });

  it("an emit step whose event is never stored does not retry forever: the event is dropped and the run fails at that step", async () => {
    // The emit step is the last: the run is stored as succeeded, with its event still to publish.
    const wf = workflowOf([{ id: "tell", type: "emit", event_type: "order.unstorable", data: { n: 1 } }]);
    const run = newRun(wf, {}, { type: "manual" }, Date.now());
    await runs.insert(run);
    let refused = 0;
    refuseEvent = (event) => event.type === "order.unstorable" && ++refused > 0;
    const log = logger();
    engine({ log });

    await until(async () => (await runs.get(ALL_TENANTS, run.id))?.status === "failed", 10_000, "the run failed");
    const stored = (await runs.get(ALL_TENANTS, run.id)) as RunDoc;
    expect(stored.steps[0]).toMatchObject({ status: "failed" });
    expect(stored.steps[0].error).toBe(
      `the event order.unstorable (${(stored.steps[0].output as { event_id: string }).event_id}) could not be stored in ${MAX_STALLS} tries in a row; given up`,
    );
    await until(
      async () =>
        (await events.find(ALL_TENANTS, { type: "workflow.completed", "data.run_id": run.id, "data.status": "failed" })).length === 1,
      3000,
      "workflow.completed",
    );
    // The event was tried once per claim (the first claim stored the emit step: progress, so not
    // counted), then dropped (and said so), never stored.
    expect(refused).toBe(MAX_STALLS + 1);
    expect(await events.count(ALL_TENANTS, { type: "order.unstorable" })).toBe(0);
    expect(
      messages(log.error).some((m) =>
        m.includes(`events it could not publish in ${MAX_STALLS} tries in a row are dropped: order.unstorable`),
      ),
    ).toBe(true);
    // The outbox is released by the write after the hand-over, which may come after the event is visible.
    await until(async () => ((await runs.get(ALL_TENANTS, run.id)) as RunDoc).outbox.length === 0, 3000, "the outbox released");
    expect(((await runs.get(ALL_TENANTS, run.id)) as RunDoc).outbox).toEqual([]);
  });

  it("a claim that fails neither crashes the process nor is retried every poll, and the run goes on once the store answers", async () => {
    let down = true;
    const calls: string[] = [];
    const log = logger();
    const e = engine({ runs: failing(runs, (method) => down && method === "update", calls), log });
    const wf = workflowOf([
      { id: "call", type: "http", method: "POST", url: `${url}/later`, headers: {}, body: null, timeout_ms: 1000, retries: 0 },
    ]);
    const run = newRun(wf, {}, { type: "manual" }, Date.now());
    await runs.insert(run);
    e.wake(run.id); // rejected by the store: must not become an unhandled rejection
    await realTimePasses(3200, "how many claims the engine tries within a fixed window is what is measured");
    // Polls back off (1 s, 2 s, …) instead of writing every 500 ms: the wake-up and at most 3 polls in 3.2 s.
    const failedClaims = calls.filter((c) => c === "update").length;
    expect(failedClaims).toBeGreaterThanOrEqual(2);
    expect(failedClaims).toBeLessThanOrEqual(4);
    expect(rejections).toEqual([]);
    expect(messages(log.warn).filter((m) => m.startsWith("claiming runs failed (storage_unavailable)"))).toHaveLength(1);
    expect(hits.filter((h) => h === "/later")).toHaveLength(0);

    down = false;
    await until(async () => (await runs.get(ALL_TENANTS, run.id))?.status === "succeeded", 8000, "the run succeeded");
    expect(hits.filter((h) => h === "/later")).toHaveLength(1);
    expect(messages(log.info).some((m) => m.startsWith("claiming runs works again after"))).toBe(true);
  });
});
