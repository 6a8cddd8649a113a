import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../../tools/procs";
import { RECOVER_BATCH } from "../../services/webhook-dispatcher/recovery.mixin";
import { api, expectError, startPlatform, type Platform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { realTimePasses } from "../../tools/eventually";

/**
 * The delivery log a customer debugs with (each attempt's request and answer) and the actions on
 * it: retry now, test events, filters, an event's deliveries, and recovery jobs that survive a restart.
 */

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(() => rx.close());

let paths = 0;
async function hook(p: Platform, key: string, events: string[], path = `/r${++paths}`) {
  const res = await api(p.baseUrl, "POST", "/webhooks", { key, body: { url: rx.url(path), events } });
  expect(res.status).toBe(201);
  rx.setSecret(path, res.body.data.secret);
  return { path, ...res.body.data };
}
async function emit(p: Platform, key: string, type: string, data: Record<string, unknown> = {}) {
  const res = await api(p.baseUrl, "POST", "/events", { key, body: { type, data } });
  expect(res.status).toBe(201);
  return res.body.data;
}
const get = (p: Platform, key: string, path: string) => api(p.baseUrl, "GET", path, { key });
/** The delivery of `eventId` to `webhookId` once it is in the log, in full. */
async function deliveryOf(p: Platform, key: string, webhookId: string, eventId: string, check: (d: any) => boolean) {
  let found: any;
  await waitFor(`the delivery of ${eventId}`, async () => {
    const list = await get(p, key, `/webhooks/${webhookId}/deliveries?event_id=${eventId}`);
    const id = list.body.data[0]?.id;
    if (!id) return false;
    found = (await get(p, key, `/webhooks/${webhookId}/deliveries/${id}`)).body.data;
    return check(found);
  });
  return found;
}

describe("a delivery log that shows what was sent and answered, and acts on it", () => {
  let p: Platform;
  let acme: Awaited<ReturnType<Platform["createOrg"]>>;
  beforeAll(async () => {
    // Retries a minute apart: a pending delivery stays pending while the test acts on it.
    p = await startPlatform({
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      WEBHOOK_TIMEOUT_MS: "2000",
      WEBHOOK_RETRY_DELAYS_MS: "60000,60000,60000,60000",
    });
    acme = await p.createOrg("Acme");
  });
  afterAll(() => p.stop());

  it("keeps each attempt's URL, headers without signatures, and the answer's status, headers and first 4 KiB", async () => {
    const wh = await hook(p, acme.live, ["order.failed"]);
    const body = `{"error":"handler crashed","trace":"${"x".repeat(5000)}"}`;
    rx.behave(wh.path, () => ({ status: 500, body, headers: { "content-type": "application/json", "x-handler": "orders-v2" } }));
    const event = await emit(p, acme.live, "order.failed", { order_id: "o_1" });
    const d = await deliveryOf(p, acme.live, wh.id, event.id, (x) => x.attempts.length === 1);
    const [attempt] = d.attempts;
    expect(attempt).toMatchObject({ number: 1, status_code: 500, error: "the receiver answered 500" });
    expect(attempt.request).toEqual({
      method: "POST",
      url: rx.url(wh.path),
      headers: {
        "content-type": "application/json",
        "user-agent": expect.any(String),
        "service-event": "order.failed",
        "service-delivery": d.id,
        "webhook-id": d.id,
        "webhook-timestamp": expect.stringMatching(/^\d+$/),
      },
      body_bytes: Buffer.byteLength(rx.byPath(wh.path)[0].body),
    });
    // The body sent is the event's payload, exactly the bytes the receiver got.
    expect(JSON.stringify(d.payload)).toBe(rx.byPath(wh.path)[0].body);
    expect(attempt.response.headers).toMatchObject({ "content-type": "application/json", "x-handler": "orders-v2" });
    expect(attempt.response).toMatchObject({ body_encoding: "utf8", body_bytes: body.length, body_truncated: true });
    expect(attempt.response.body).toBe(body.slice(0, 4096));
    // The list shows each attempt's summary only.
    const list = await get(p, acme.live, `/webhooks/${wh.id}/deliveries`);
    expect(list.body.data[0].attempts[0]).toEqual({
      number: 1,
      at: attempt.at,
      status_code: 500,
      duration_ms: attempt.duration_ms,
      error: "the receiver answered 500",
    });
  });

  it("keeps a binary answer as base64, marked", async () => {
    const wh = await hook(p, acme.live, ["order.binary"]);
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x81, 0x41]);
    rx.behave(wh.path, () => ({ status: 502, body: bytes, headers: { "content-type": "application/octet-stream" } }));
    const event = await emit(p, acme.live, "order.binary");
    const d = await deliveryOf(p, acme.live, wh.id, event.id, (x) => x.attempts.length === 1);
    expect(d.attempts[0].response).toMatchObject({
      body: bytes.toString("base64"),
      body_encoding: "base64",
      body_bytes: 5,
      body_truncated: false,
    });
  });

  it("retries a pending delivery now, to the URL as patched, once while an attempt is in flight", async () => {
    const wh = await hook(p, acme.live, ["order.retry"]);
    rx.behave(wh.path, () => ({ status: 500 }));
    const event = await emit(p, acme.live, "order.retry");
    const first = await deliveryOf(p, acme.live, wh.id, event.id, (x) => x.attempts.length === 1 && x.status === "pending");
    // The receiver is repaired at a new path; its next attempt would be a minute away.
    const fixed = `/r${++paths}`;
    rx.setSecret(fixed, (await api(p.baseUrl, "POST", `/webhooks/${wh.id}/rotate-secret`, { key: acme.live })).body.data.secret);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    rx.behave(fixed, () => ({ status: 200, gate }));
    expect((await api(p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: acme.live, body: { url: rx.url(fixed) } })).status).toBe(200);
    const retried = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/${first.id}/retry`, { key: acme.live });
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ id: first.id, status: "pending" });
    await rx.waitFor(() => rx.byPath(fixed).length === 1, 5000);
    // In flight: asked again, nothing more is sent.
    const again = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/${first.id}/retry`, { key: acme.live });
    expect(again.status).toBe(200);
    release();
    const done = await deliveryOf(p, acme.live, wh.id, event.id, (x) => x.status === "succeeded");
    expect(rx.byPath(fixed)).toHaveLength(1);
    expect(rx.byPath(fixed)[0].verified).toBe(true);
    expect(done.attempts.map((a: any) => [a.status_code, a.request.url])).toEqual([
      [500, rx.url(wh.path)],
      [200, rx.url(fixed)],
    ]);
    // Settled: retry refuses (redeliver starts a new series); unknown ids are 404.
    expectError(
      await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/${first.id}/retry`, { key: acme.live }),
      409,
      "invalid_state",
      "delivery_id",
    );
    expectError(
      await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/del_nope/retry`, { key: acme.live }),
      404,
      "resource_not_found",
    );
  });

  it("sends a signed test event of a subscribed type, marked as a test, and logs it", async () => {
    const wh = await hook(p, acme.live, ["workflow.completed", "invoice.paid"]);
    const res = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body: { event_type: "workflow.completed" } });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ webhook_id: wh.id, event_type: "workflow.completed", test: true });
    await rx.waitFor(() => rx.byPath(wh.path).length === 1, 5000);
    const [got] = rx.byPath(wh.path);
    expect(got.verified).toBe(true);
    expect(got.json).toEqual({
      id: res.body.data.event_id,
      type: "workflow.completed",
      created_at: expect.any(String),
      data: { workflow_id: "wf_example", run_id: "run_example", status: "succeeded" },
      test: true,
    });
    const d = await deliveryOf(p, acme.live, wh.id, res.body.data.event_id, (x) => x.status === "succeeded");
    expect(d).toMatchObject({ test: true, payload: got.json });
    // Not in the event log: no other webhook or workflow saw it.
    expect((await get(p, acme.live, `/events/${res.body.data.event_id}`)).status).toBe(404);
    // A custom type sends the latest stored event's data; a type it does not subscribe to is refused.
    await emit(p, acme.live, "invoice.paid", { invoice: "in_7" });
    await rx.waitFor(() => rx.byPath(wh.path).length === 2, 5000);
    const custom = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body: { event_type: "invoice.paid" } });
    expect(custom.status).toBe(201);
    await rx.waitFor(() => rx.byPath(wh.path).length === 3, 5000);
    expect(rx.byPath(wh.path)[2].json).toMatchObject({ type: "invoice.paid", data: { invoice: "in_7" }, test: true });
    expectError(
      await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body: { event_type: "order.created" } }),
      400,
      "parameter_invalid",
      "event_type",
    );
  });

  it("sends a test event with the data given, held to an event's limits, and stores no event", async () => {
    const wh = await hook(p, acme.live, ["workflow.completed", "bill.tested"]);
    const data = { invoice: "in_9", lines: [{ sku: "a", qty: 2 }], note: "ünïcode", nothing: null };
    const res = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body: { event_type: "bill.tested", data } });
    expect(res.status).toBe(201);
    await rx.waitFor(() => rx.byPath(wh.path).length === 1, 5000);
    const [got] = rx.byPath(wh.path);
    expect(got.verified).toBe(true);
    expect(got.json).toEqual({ id: res.body.data.event_id, type: "bill.tested", created_at: expect.any(String), data, test: true });
    // The example of a system type gives way to the data given, even an empty object.
    const empty = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body: { data: {} } });
    expect(empty.status).toBe(201);
    await rx.waitFor(() => rx.byPath(wh.path).length === 2, 5000);
    expect(rx.byPath(wh.path)[1].json).toMatchObject({ type: "workflow.completed", data: {}, test: true });
    // Neither is in the event log.
    for (const sent of [res, empty]) expect((await get(p, acme.live, `/events/${sent.body.data.event_id}`)).status).toBe(404);
    expect((await get(p, acme.live, "/events?type=bill.tested")).body.data).toEqual([]);

    const refused = async (body: Record<string, unknown>) => {
      const r = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("parameter_invalid");
      expect(r.body.error.param).toMatch(/^data\b/);
      return r;
    };
    for (const notObject of [null, 1, "text", true, [], [{ a: 1 }]]) await refused({ data: notObject });
    // As POST /events: the body is level 1, `data` level 2, so data nests 31 levels at most.
    const nest = (levels: number) => {
      let v: Record<string, unknown> = {};
      for (let i = 1; i < levels; i++) v = { a: v };
      return v;
    };
    const deep = await refused({ data: nest(32) });
    expect(deep.body.error.param).toBe(`data${".a".repeat(31)}`);
    expect(deep.body.error.message).toMatch(/nested too deep/);
    const big = await refused({ data: { s: "x".repeat(64 * 1024) } });
    expect(big.body.error).toMatchObject({ param: "data", message: expect.stringMatching(/limit is 65536/) });
    // What a deep-enough or large-enough value may be is the same as an event's data.
    expect((await api(p.baseUrl, "POST", "/events", { key: acme.live, body: { type: "x.deep", data: nest(32) } })).status).toBe(400);
    expect((await api(p.baseUrl, "POST", "/events", { key: acme.live, body: { type: "x.deep", data: nest(31) } })).status).toBe(201);
    const ok = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/test`, { key: acme.live, body: { data: nest(31) } });
    expect(ok.status).toBe(201);
    await rx.waitFor(() => rx.byPath(wh.path).length === 3, 5000);
    expect(rx.byPath(wh.path)[2].json.data).toEqual(nest(31));
    expect(rx.byPath(wh.path)).toHaveLength(3);
  });

  it("filters the log by event type, status, creation time and event id, and lists an event's deliveries", async () => {
    const a = await hook(p, acme.live, ["*"]);
    const b = await hook(p, acme.live, ["shop.sold"]);
    rx.behave(a.path, (n) => ({ status: n === 2 ? 500 : 200 }));
    const e1 = await emit(p, acme.live, "shop.sold", { n: 1 });
    await rx.waitFor(() => rx.byPath(a.path).length === 1 && rx.byPath(b.path).length === 1, 5000);
    const between = new Date(Date.now() + 1).toISOString();
    await realTimePasses(5, "the next events are created after `between`, at a later millisecond");
    const e2 = await emit(p, acme.live, "shop.returned", { n: 2 });
    const e3 = await emit(p, acme.live, "shop.sold", { n: 3 });
    await waitFor("all deliveries to a settled or pending", async () => {
      const list = await get(p, acme.live, `/webhooks/${a.id}/deliveries`);
      return list.body.data.length === 3 && list.body.data.every((d: any) => d.attempts.length === 1);
    });
    const ids = async (query: string) =>
      (await get(p, acme.live, `/webhooks/${a.id}/deliveries?${query}`)).body.data.map((d: any) => d.event_id);
    expect(await ids("event_type=shop.sold")).toEqual([e3.id, e1.id]);
    expect(await ids("status=pending")).toEqual([e2.id]);
    expect(await ids("status=succeeded&event_type=shop.sold")).toEqual([e3.id, e1.id]);
    expect(await ids(`created_after=${between}`)).toEqual([e3.id, e2.id]);
    expect(await ids(`created_before=${between}`)).toEqual([e1.id]);
    expect(await ids(`created_after=${between}&limit=1`)).toEqual([e3.id]);
    const cursor = (await get(p, acme.live, `/webhooks/${a.id}/deliveries?created_after=${between}&limit=1`)).body.data[0].id;
    expect(await ids(`created_after=${between}&limit=1&starting_after=${cursor}`)).toEqual([e2.id]);
    expect(await ids(`created_after=${between}&event_type=shop.sold`)).toEqual([e3.id]);
    expect(await ids(`event_id=${e2.id}`)).toEqual([e2.id]);
    expect(await ids(`event_id=${e2.id}&status=succeeded`)).toEqual([]);
    expectError(await get(p, acme.live, `/webhooks/${a.id}/deliveries?created_after=yesterday`), 400, "parameter_invalid", "created_after");

    const ofEvent = await get(p, acme.live, `/events/${e3.id}/deliveries`);
    expect(ofEvent.status).toBe(200);
    expect(ofEvent.body.data.map((d: any) => d.webhook_id).sort()).toEqual([a.id, b.id].sort());
    expect(ofEvent.body.meta).toMatchObject({ total: 2 });
    expectError(await get(p, acme.live, `/events/evt_nope/deliveries`), 404, "resource_not_found");
    // The log's view needs webhooks:read, whatever events:read allows.
    const eventsOnly = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "events", scopes: ["events:read"] } });
    expectError(await get(p, eventsOnly.body.data.key, `/events/${e3.id}/deliveries`), 403, "insufficient_scope");
  });
});

describe("recovering a webhook's failed deliveries since a time", () => {
  const dir = mkdtempSync(join(tmpdir(), "wfp-recover-"));
  const env = {
    DATA_DIR: dir,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WEBHOOK_TIMEOUT_MS: "5000",
    WEBHOOK_RETRY_DELAYS_MS: "10,10,10,10",
    RATE_LIMIT_MAX: "100000",
  };
  let p: Platform;
  afterAll(async () => {
    await p?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("re-sends only the failed deliveries since T, shows progress, and resumes after a restart", async () => {
    p = await startPlatform(env);
    const acme = await p.createOrg("Acme");
    const wh = await hook(p, acme.live, ["sync.item"]);
    const failed = async () => (await get(p, acme.live, `/webhooks/${wh.id}/deliveries?status=failed&per_page=1`)).body.meta.total;
    rx.behave(wh.path, () => ({ status: 500 }));
    const before = await Promise.all([0, 1, 2].map((i) => emit(p, acme.live, "sync.item", { before: i })));
    await waitFor("the early deliveries to fail", async () => (await failed()) === 3);
    await realTimePasses(2, "`since` falls at a later millisecond than the early deliveries");
    const since = new Date().toISOString();
    await realTimePasses(2, "the later deliveries are created at a later millisecond than `since`");
    // 150 deliveries held at the receiver until all are stored, then failed (the webhook is disabled on the way).
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    rx.behave(wh.path, () => ({ status: 500, gate }));
    const after: { id: string }[] = [];
    for (let i = 0; i < 150; i += 25)
      after.push(...(await Promise.all(Array.from({ length: 25 }, (_, j) => emit(p, acme.live, "sync.item", { i: i + j })))));
    await waitFor(
      "150 deliveries stored",
      async () => (await get(p, acme.live, `/webhooks/${wh.id}/deliveries?created_after=${since}&per_page=1`)).body.meta.total === 150,
    );
    open();
    await waitFor("all 153 to fail", async () => (await failed()) === 153, 60_000);
    // Repaired and enabled again; a delivery after T that succeeds is not resent.
    rx.behave(wh.path, () => ({ status: 200 }));
    expect((await api(p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: acme.live, body: { status: "enabled" } })).status).toBe(200);
    const fine = await emit(p, acme.live, "sync.item", { fine: true });
    await waitFor(
      "the new delivery to succeed",
      async () => (await get(p, acme.live, `/webhooks/${wh.id}/deliveries?event_id=${fine.id}&status=succeeded`)).body.data.length === 1,
    );
    const receivedBefore = rx.byPath(wh.path).length;

    const started = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/recover`, { key: acme.live, body: { since } });
    expect(started.status).toBe(202);
    expect(started.body.data).toMatchObject({ id: expect.stringMatching(/^rcv_/), status: "running", total: 150, done: 0, since });
    const job = started.body.data.id;
    expectError(await api(p.baseUrl, "POST", `/webhooks/${wh.id}/recover`, { key: acme.live, body: { since } }), 409, "invalid_state");
    // Progress shows between batches (of RECOVER_BATCH, a few a second); the platform stops mid-job.
    let seen: any;
    await waitFor("a first batch done", async () => {
      seen = (await get(p, acme.live, `/webhooks/${wh.id}/recover/${job}`)).body.data;
      return seen.done > 0;
    });
    expect(seen).toMatchObject({ status: "running", total: 150 });
    expect(seen.done % RECOVER_BATCH).toBe(0);
    expect(seen.done).toBeLessThan(150);
    await p.stop();

    p = await startPlatform(env);
    await waitFor(
      "the job to finish after the restart",
      async () => (await get(p, acme.live, `/webhooks/${wh.id}/recover/${job}`)).body.data.status === "succeeded",
      30_000,
    );
    expect((await get(p, acme.live, `/webhooks/${wh.id}/recover/${job}`)).body.data).toMatchObject({
      done: 150,
      total: 150,
      finished_at: expect.any(String),
    });
    const succeeded = async () => (await get(p, acme.live, `/webhooks/${wh.id}/deliveries?status=succeeded&per_page=1`)).body.meta.total;
    await waitFor("every recovered delivery to succeed", async () => (await succeeded()) === 151);
    expect(await failed()).toBe(3);
    const resent = rx
      .byPath(wh.path)
      .slice(receivedBefore)
      .map((r) => r.json.id);
    expect(new Set(resent)).toEqual(new Set(after.map((e) => e.id)));
    for (const e of [...before, fine]) expect(resent).not.toContain(e.id);
    expectError(await get(p, acme.live, `/webhooks/${wh.id}/recover/rcv_nope`), 404, "resource_not_found");
    expectError(
      await api(p.baseUrl, "POST", `/webhooks/${wh.id}/recover`, { key: acme.live, body: { since: "soon" } }),
      400,
      "parameter_invalid",
      "since",
    );
  }, 120_000);
});
