import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServiceBroker } from "moleculer";
import { createBroker } from "../../app/broker";
import { loadSettings } from "../../shared/config";
import type { DeliveryDoc } from "../../shared/records/deliveries";
import { RUN_OUTCOMES, WEBHOOK_OUTCOMES } from "../../shared/records/outcomes";
import { SqliteStore } from "../../shared/storage/sqlite";
import { openCollection, type Doc } from "../../shared/storage/types";
import { waitFor } from "../../tools/procs";
import { api, type Bootstrap } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

/**
 * Outcome counters stay exact when several nodes count into the same rows at once: two platforms
 * on one database file, each through its own SQLite connection (as two processes would be), both
 * dispatching and running; the counters must equal what the delivery log and the runs say.
 */

let dir: string;
const stores: SqliteStore[] = [];
const brokers: ServiceBroker[] = [];
let rx: Receiver;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wfp-counters-"));
  rx = await startReceiver();
  for (let i = 0; i < 2; i++) {
    const store = new SqliteStore(dir);
    const settings = loadSettings({
      DATA_DIR: dir,
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "false",
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      WEBHOOK_TIMEOUT_MS: "2000",
      WEBHOOK_RETRY_DELAYS_MS: "5,5,5,5",
    });
    const broker = createBroker(settings, { nodeID: `counter-${i}` }, store);
    await broker.start();
    stores.push(store);
    brokers.push(broker);
  }
});

afterAll(async () => {
  for (const b of brokers) await b.stop();
  for (const s of stores) await s.close();
  await rx.close();
  rmSync(dir, { recursive: true, force: true });
});

it("counts every attempt, settlement and run once across two nodes writing the same rows", async () => {
  const [a, b] = brokers;
  const made = await a.call<Bootstrap, { name: string }>("orgs.create", { name: "Counted" });
  const key = made.api_keys.find((k) => k.environment === "live")!.key;
  const gateway = a.getLocalService("gateway") as unknown as { server: { address(): { port: number } } };
  const baseUrl = `http://127.0.0.1:${gateway.server.address().port}/v1`;
  const hook = (await api(baseUrl, "POST", "/webhooks", { key, body: { url: rx.url("/flaky"), events: ["c.tick"] } })).body.data;
  rx.setSecret("/flaky", hook.secret);
  // Two attempts in three fail: deliveries retry, some settle failed, none disable the webhook for long.
  rx.behave("/flaky", (n) => (n % 3 === 0 ? {} : { status: 500 }));
  const wf = (
    await api(baseUrl, "POST", "/workflows", {
      key,
      body: { name: "on tick", trigger: { type: "event", event_type: "c.tick" }, steps: [{ type: "delay", duration_ms: 1 }] },
    })
  ).body.data;

  const tenant = { org_id: made.org.id, environment: "live" as const };
  const total = 300;
  const counted = stores.map((store) => jest.spyOn(openCollection(store, WEBHOOK_OUTCOMES), "increment"));
  // Half the events through each node: both dispatchers and both engines take work.
  await Promise.all(
    Array.from({ length: total }, (_, i) =>
      (i % 2 ? a : b).call(
        "events.emit",
        { type: "c.tick", data: { i } },
        { meta: { auth: { ...tenant, key_id: "key_test", scopes: [] } } },
      ),
    ),
  );

  const deliveries = stores[0].collection<DeliveryDoc>("webhook_deliveries");
  const runs = stores[0].collection<Doc & { status: string; workflow_id: string }>("workflow_runs");
  await eventuallyValue(
    "every delivery and run settled ([made, pending, runs ended])",
    () =>
      Promise.all([
        deliveries.count(tenant, { webhook_id: hook.id }),
        deliveries.count(tenant, { webhook_id: hook.id, status: "pending" }),
        runs.count(tenant, { workflow_id: wf.id, status: "succeeded" }),
      ]),
    ([made, pending, ended]) => made === total && pending === 0 && ended === total,
    60_000,
    100,
  );
  // The outcome counters are written at the end of the turn that counted them.
  await waitFor("the outcome counters to hold every settled delivery and ended run", async () => {
    for (const period of ["hour", "day"] as const) {
      const rows = await openCollection(stores[1], WEBHOOK_OUTCOMES).find(tenant, { period, webhook_id: hook.id });
      const runRows = await openCollection(stores[1], RUN_OUTCOMES).find(tenant, { period, workflow_id: wf.id });
      if (rows.reduce((n, r) => n + (r.succeeded ?? 0) + (r.failed ?? 0), 0) !== total) return false;
      if (runRows.reduce((n, r) => n + (r.succeeded ?? 0), 0) !== total) return false;
    }
    return true;
  });

  const log = await deliveries.find(tenant, { webhook_id: hook.id });
  const attempts = log.flatMap((d) => d.attempts).filter((t) => !t.error?.startsWith("not sent"));
  const truth = {
    created: log.length,
    succeeded: log.filter((d) => d.status === "succeeded").length,
    failed: log.filter((d) => d.status === "failed").length,
    attempts_succeeded: attempts.filter((t) => t.status_code !== null && t.status_code < 300).length,
    attempts_failed: attempts.filter((t) => t.status_code === null || t.status_code >= 300).length,
  };
  expect(truth.attempts_failed).toBeGreaterThan(total);
  // Both nodes counted into the rows.
  for (const spy of counted) expect(spy.mock.calls.length).toBeGreaterThan(0);

  for (const period of ["hour", "day"] as const) {
    const rows = await openCollection(stores[1], WEBHOOK_OUTCOMES).find(tenant, { period, webhook_id: hook.id });
    const sum = (field: keyof typeof truth) => rows.reduce((n, r) => n + (r[field] ?? 0), 0);
    expect({
      period,
      created: sum("created"),
      succeeded: sum("succeeded"),
      failed: sum("failed"),
      attempts_succeeded: sum("attempts_succeeded"),
      attempts_failed: sum("attempts_failed"),
    }).toEqual({ period, ...truth });
    const runRows = await openCollection(stores[1], RUN_OUTCOMES).find(tenant, { period, workflow_id: wf.id });
    expect({ period, succeeded: runRows.reduce((n, r) => n + (r.succeeded ?? 0), 0) }).toEqual({ period, succeeded: total });
  }
  const answer = (await api(baseUrl, "GET", "/analytics/webhooks", { key })).body.data;
  expect(answer).toMatchObject({
    total,
    by_status: { pending: 0, succeeded: truth.succeeded, failed: truth.failed },
    attempt_counts: { succeeded: truth.attempts_succeeded, failed: truth.attempts_failed },
  });
}, 90_000);
