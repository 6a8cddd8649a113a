import { existsSync, unlinkSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { DATABASE_FILE } from "../../shared/storage/sqlite";
import { api, expectError, startPlatform, type Platform, type TestOrg } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { fillDisk, mountTmpfs } from "../helpers/tmpfs";
import { eventuallyValue, realTimePasses } from "../../tools/eventually";

/**
 * Storage failures are honest (issue 15), on a real full disk: a small tmpfs mounted here holds
 * DATA_DIR, and the whole platform runs in this process on it, reached over real HTTP.
 *
 * - A write that fails is answered 503 `storage_unavailable` with `Retry-After`, in the contract's
 *   error shape, and nothing of it is stored: not in lists, not after a restart on the same files.
 * - What was stored before is still served: reads keep working on the full disk.
 * - `/ready` writes a probe: 503 naming the store while the disk is full, 200 after.
 * - Space returns (the filler is deleted): writes succeed again, with no restart; a webhook retry
 *   that fell due meanwhile is sent once, and a run whose http step's answer could not be stored is
 *   resumed: the request is sent once more and the run completes. No endless re-sends.
 *
 * Needs root (mount); CI runs as root. Without it, the suite is skipped and says why.
 */
const fs = mountTmpfs("16m", "full");
const { skipReason } = fs;
if (skipReason) console.warn(`SKIPPED test/api/storage-full.test.ts: ${skipReason}`);
const MOUNT = fs.dir;

const DATA_DIR = join(MOUNT, "data");
const FILLER = join(MOUNT, "filler");
const ENV = {
  DATA_DIR,
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_RETRY_DELAYS_MS: "2000,2000,2000,2000",
  WEBHOOK_TIMEOUT_MS: "2000",
};

interface Target {
  server: Server;
  url: string;
  got: string[];
  /** Set when the first /hold request filled the disk (or failed to). */
  filled?: true | Error;
}

const until = <T>(what: string, get: () => Promise<T>, check: (v: T) => boolean, ms = 15_000): Promise<T> =>
  eventuallyValue(what, get, check, ms);

(skipReason ? describe.skip : describe)("a full disk under the whole platform (tmpfs)", () => {
  let p: Platform | undefined;
  let acme: TestOrg;
  let db: DatabaseSync;
  let target: Target;
  let rx: Receiver;
  let warns: { dispatcher: jest.SpyInstance; workflows: jest.SpyInstance; gateway: jest.SpyInstance };
  /** Writes of the dispatcher's deliveries (its claims and settlements) that failed. */
  let failedDeliveryWrites = 0;
  const ids = { events: [] as string[], webhooks: [] as string[], keys: [] as string[] };
  let webhookId: string;
  let workflowId: string;
  let runId: string;
  let firstAttemptAt: number;

  const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    api((p as Platform).baseUrl, method, path, { key: acme.live, body, headers });
  const ready = async () => {
    const res = await api((p as Platform).baseUrl.replace(/\/v1$/, ""), "GET", "/ready");
    return { status: res.status, body: res.body };
  };

  async function start(): Promise<void> {
    p = await startPlatform(ENV);
    const services = p.broker.getLocalService.bind(p.broker) as (name: string) => unknown;
    const loggerOf = (name: string) => (services(name) as { logger: { warn(...a: unknown[]): void } }).logger;
    warns = {
      dispatcher: jest.spyOn(loggerOf("webhook-dispatcher"), "warn"),
      workflows: jest.spyOn(loggerOf("workflows"), "warn"),
      gateway: jest.spyOn(loggerOf("gateway"), "warn"),
    };
    const deliveries = (services("webhook-dispatcher") as { deliveries: { update(...a: unknown[]): Promise<unknown> } }).deliveries;
    const update = deliveries.update.bind(deliveries);
    jest.spyOn(deliveries, "update").mockImplementation((...args: unknown[]) =>
      update(...args).catch((err: unknown) => {
        failedDeliveryWrites += 1;
        throw err;
      }),
    );
  }

  beforeAll(async () => {
    rx = await startReceiver();
    // The first attempt of each delivery fails (500): its retry falls due while the disk is full.
    rx.behave("/hook", (n) => ({ status: n === 1 ? 500 : 200 }));
    target = { server: undefined as unknown as Server, url: "", got: [] };
    target.server = createServer((req, res) => {
      const path = req.url ?? "";
      target.got.push(path);
      req.resume().on("end", () => {
        // The run's http step reached the target: the disk fills before the answer leaves, so the
        // engine gets the answer and cannot store it.
        if (path === "/hold" && target.got.filter((g) => g === "/hold").length === 1) {
          try {
            fillDisk(db, DATA_DIR, FILLER);
            target.filled = true;
          } catch (err) {
            target.filled = err as Error;
          }
        }
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, path }));
      });
    });
    await new Promise<void>((ok) => target.server.listen(0, "127.0.0.1", ok));
    target.url = `http://127.0.0.1:${(target.server.address() as { port: number }).port}`;
    await start();
    acme = await (p as Platform).createOrg("Acme");
    db = new DatabaseSync(join(DATA_DIR, DATABASE_FILE), { timeout: 2000 });
  }, 20_000);

  afterAll(async () => {
    if (existsSync(FILLER)) unlinkSync(FILLER);
    if (db?.isOpen) db.close();
    await p?.stop();
    target?.server.closeAllConnections();
    await new Promise((ok) => target?.server.close(ok));
    await rx?.close();
    fs.unmount();
  }, 20_000);

  it("before the disk fills, writes are stored (201)", async () => {
    const hook = await call("POST", "/webhooks", { url: rx.url("/hook"), events: ["order.created"] });
    expect(hook.status).toBe(201);
    webhookId = hook.body.data.id;
    rx.setSecret("/hook", hook.body.data.secret);
    ids.webhooks.push(webhookId);
    const key = await call("POST", "/api-keys", { name: "before", scopes: ["events:read"] });
    expect(key.status).toBe(201);
    ids.keys.push(key.body.data.id);
    const wf = await call("POST", "/workflows", {
      name: "held",
      trigger: { type: "manual" },
      steps: [
        { id: "call", type: "http", method: "POST", url: `${target.url}/hold`, timeout_ms: 1000 },
        { id: "tell", type: "emit", event_type: "order.held", data: { step: "{{steps.call.output.body.path}}" } },
      ],
    });
    expect(wf.status).toBe(201);
    workflowId = wf.body.data.id;

    const event = await call("POST", "/events", { type: "order.created", data: { n: 1 } });
    expect(event.status).toBe(201);
    ids.events.push(event.body.data.id);
    // Its delivery's first attempt fails and is settled (stored); the retry is due 2 s later.
    await until(
      "the first attempt settled",
      () => call("GET", `/webhooks/${webhookId}/deliveries`),
      (r) => r.body.data?.[0]?.attempts?.length === 1,
    );
    firstAttemptAt = Date.now();

    // The run's http step fills the disk while its request is being answered (see fillDisk).
    const run = await call("POST", `/workflows/${workflowId}/runs`, {});
    expect(run.status).toBe(201);
    runId = run.body.data.id;
    await until(
      "the disk filled",
      async () => target.filled,
      (f) => f !== undefined,
      5000,
    );
    expect(target.filled).toBe(true);
    expect(Date.now() - firstAttemptAt).toBeLessThan(1500); // filled before the webhook retry is due
  });

  it("on the full disk, every write answers 503 storage_unavailable with Retry-After, and nothing of it is stored", async () => {
    const refused = [
      await call("POST", "/events", { type: "disk.refused", data: { marker: "refused" } }),
      await call("POST", "/events", { type: "disk.idem", data: { marker: "refused-idem" } }, { "Idempotency-Key": "full-1" }),
      await call("POST", "/webhooks", { url: rx.url("/refused"), events: ["order.created"] }),
      await call("POST", "/api-keys", { name: "refused", scopes: ["events:read"] }),
      await call("POST", `/workflows/${workflowId}/runs`, { input: { marker: "refused" } }),
    ];
    for (const res of refused) {
      expectError(res, 503, "storage_unavailable");
      expect(res.body.error.type).toBe("api_error");
      expect(res.body.error.message).toContain("the disk is full");
      expect(res.headers["retry-after"]).toBe("1");
    }

    // Data stored before is served: reads work on the full disk, and hold none of the refused writes.
    const events = await call("GET", "/events?per_page=100");
    expect(events.status).toBe(200);
    expect(events.body.data.map((e: { id: string }) => e.id)).toEqual(expect.arrayContaining(ids.events));
    expect(JSON.stringify(events.body.data)).not.toContain("refused");
    expect((await call("GET", `/events/${ids.events[0]}`)).status).toBe(200);
    const types = await call("GET", "/events/types");
    expect(types.status).toBe(200);
    expect(JSON.stringify(types.body)).not.toContain("disk.refused");
    const hooks = await call("GET", "/webhooks");
    expect(hooks.status).toBe(200);
    expect(hooks.body.data.map((w: { id: string }) => w.id)).toEqual([webhookId]);
    const keys = await call("GET", "/api-keys?per_page=100");
    expect(keys.status).toBe(200);
    expect(keys.body.data.map((k: { name: string }) => k.name)).toContain("before");
    expect(keys.body.data.map((k: { name: string }) => k.name)).not.toContain("refused");
    const runs = await call("GET", `/workflows/${workflowId}/runs`);
    expect(runs.body.data.map((r: { id: string }) => r.id)).toEqual([runId]);
    // The run's http step was answered, but the answer could not be stored: it is not reported done.
    const run = await call("GET", `/workflows/${workflowId}/runs/${runId}`);
    expect(run.body.data).toMatchObject({ status: "running", steps: [{ status: "running", attempt_count: 0 }, { status: "pending" }] });

    // /ready probes a write: not ready, and it says why.
    const probe = await ready();
    expect(probe).toMatchObject({ status: 503, body: { status: "not_ready", store: "unavailable: the disk is full" } });

    // The webhook retry falls due (2 s after the first attempt) while the disk is still full: its
    // claim fails, and the dispatcher backs off (1 s, 2 s, …) instead of trying every 500 ms poll.
    await realTimePasses(Math.max(0, firstAttemptAt + 4500 - Date.now()), "the dispatcher's back-off must hold its claims off meanwhile");
    expect(rx.byPath("/hook")).toHaveLength(1);
    expect(failedDeliveryWrites).toBeGreaterThanOrEqual(1);
    expect(failedDeliveryWrites).toBeLessThanOrEqual(4);
    expect(existsSync(FILLER)).toBe(true);
  }, 20_000);

  it("when space returns, writes succeed again without a restart; the webhook retry and the run go on, sent once more each", async () => {
    unlinkSync(FILLER);
    const after = await call("POST", "/events", { type: "disk.after", data: { n: 2 } });
    expect(after.status).toBe(201);
    ids.events.push(after.body.data.id);
    // The same Idempotency-Key as the refused request: that 503 was not kept as its answer.
    const retried = await call("POST", "/events", { type: "disk.idem", data: { marker: "refused-idem" } }, { "Idempotency-Key": "full-1" });
    expect(retried.status).toBe(201);
    expect(retried.headers["idempotent-replayed"]).toBeUndefined();
    ids.events.push(retried.body.data.id);
    const key = await call("POST", "/api-keys", { name: "after", scopes: ["events:read"] });
    expect(key.status).toBe(201);
    ids.keys.push(key.body.data.id);
    const hook = await call("POST", "/webhooks", { url: rx.url("/after"), events: ["never.sent"] });
    expect(hook.status).toBe(201);
    ids.webhooks.push(hook.body.data.id);
    expect(await ready()).toMatchObject({ status: 200, body: { status: "ready", store: "ok" } });

    // The retry that was due while the disk was full goes out once the claim is stored (back-off ≤ 5 s).
    await until(
      "the first delivery succeeded",
      () => call("GET", `/webhooks/${webhookId}/deliveries?per_page=100`),
      (r) => r.body.data?.some((d: { event_id: string; status: string }) => d.event_id === ids.events[0] && d.status === "succeeded"),
    );
    // The run: its claim lapses (timeout 1 s + 5 s) and it is claimed again; the step's request is
    // sent once more (its first answer was never stored) and the run completes.
    const run = await until(
      "the run ended",
      () => call("GET", `/workflows/${workflowId}/runs/${runId}`),
      (r) => ["succeeded", "failed"].includes(r.body.data?.status),
      15_000,
    );
    expect(run.body.data).toMatchObject({
      status: "succeeded",
      steps: [{ status: "succeeded", attempt_count: 1, output: { status_code: 200 } }, { status: "succeeded" }],
    });
    const held = await until(
      "the run's event",
      () => call("GET", "/events?type=order.held"),
      (r) => r.body.data?.length === 1,
    );
    ids.events.push(held.body.data[0].id);

    // Nothing more can arrive: the run has ended and the delivery has succeeded, so neither is
    // claimed or sent again.
    expect(target.got.filter((g) => g === "/hold")).toHaveLength(2);
    const deliveries = (await call("GET", `/webhooks/${webhookId}/deliveries?per_page=100`)).body.data;
    expect(
      deliveries
        .find((d: { event_id: string }) => d.event_id === ids.events[0])
        .attempts.map((a: { status_code: number }) => a.status_code),
    ).toEqual([500, 200]);
    // One request per attempt stored, none lost or repeated.
    expect(rx.byPath("/hook").length).toBe(2);
    // Logged once per kind of failure, not per poll or per delivery.
    const said = (spy: jest.SpyInstance, start: string) => spy.mock.calls.filter((c) => String(c[0]).startsWith(start)).length;
    expect(said(warns.dispatcher, "claiming deliveries failed (storage_unavailable)")).toBe(1);
    expect(said(warns.workflows, "driving runs failed (storage_unavailable)")).toBe(1);
    expect(said(warns.gateway, "store probe failed (storage_unavailable)")).toBe(1);
  }, 25_000);

  it("after a restart on the same DATA_DIR, everything answered 201 is there and nothing answered 503", async () => {
    db.close();
    await (p as Platform).stop();
    p = undefined;
    await start();
    const events = (await call("GET", "/events?per_page=100")).body.data as { id: string; type: string; data: Record<string, unknown> }[];
    expect(events.map((e) => e.id)).toEqual(expect.arrayContaining(ids.events));
    expect(events.filter((e) => e.type === "disk.refused")).toEqual([]);
    expect(events.filter((e) => e.data.marker === "refused-idem")).toHaveLength(1);
    const hooks = (await call("GET", "/webhooks")).body.data as { id: string; url: string }[];
    expect(hooks.map((w) => w.id).sort()).toEqual([...ids.webhooks].sort());
    const keys = (await call("GET", "/api-keys?per_page=100")).body.data as { id: string; name: string }[];
    expect(keys.map((k) => k.id)).toEqual(expect.arrayContaining(ids.keys));
    expect(keys.map((k) => k.name)).not.toContain("refused");
    // No api_key.created for the refused key either: not half applied.
    expect(events.filter((e) => e.type === "api_key.created" && e.data.name === "refused")).toEqual([]);
    const runs = (await call("GET", `/workflows/${workflowId}/runs`)).body.data as { id: string; status: string }[];
    expect(runs).toEqual([expect.objectContaining({ id: runId, status: "succeeded" })]);
    expect((await ready()).status).toBe(200);
  }, 20_000);
});
