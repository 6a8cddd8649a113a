import { api, expectError, startPlatform, type Platform } from "../helpers/platform";
import { createHmac } from "node:crypto";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

/** Short settings, so retries and time-outs play out within a test. */
const FAST = { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WEBHOOK_TIMEOUT_MS: "300", WEBHOOK_RETRY_DELAYS_MS: "60,60,60,60" };

let p: Platform;
let rx: Receiver;
let acme: { org: { id: string }; live: string; test: string };
let globex: { org: { id: string }; live: string; test: string };

beforeAll(async () => {
  p = await startPlatform(FAST);
  rx = await startReceiver();
  acme = await p.createOrg("Acme");
  globex = await p.createOrg("Globex");
});
afterAll(async () => {
  await p.stop();
  await rx.close();
});

let paths = 0;
/** A webhook to a fresh receiver path, whose secret the receiver then checks. */
async function hook(key: string, events: string[], extra: Record<string, unknown> = {}) {
  const path = `/r${++paths}`;
  const res = await api(p.baseUrl, "POST", "/webhooks", { key, body: { url: rx.url(path), events, ...extra } });
  expect(res.status).toBe(201);
  rx.setSecret(path, res.body.data.secret);
  return { path, ...res.body.data };
}
const emit = async (key: string, type: string, data: Record<string, unknown> = {}) => {
  const res = await api(p.baseUrl, "POST", "/events", { key, body: { type, data } });
  expect(res.status).toBe(201);
  return res.body.data;
};
const deliveries = async (key: string, webhookId: string, query = "") =>
  (await api(p.baseUrl, "GET", `/webhooks/${webhookId}/deliveries?per_page=100${query}`, { key })).body;
/** The two signatures, computed here by hand from the documented rules. */
const serviceSignature = (secret: string, body: string) => `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
const standardSignature = ([secret]: string[], id: string, ts: number, body: string) =>
  `v1,${createHmac("sha256", Buffer.from(secret.slice("whsec_".length), "base64"))
    .update(`${id}.${ts}.${body}`)
    .digest("base64")}`;

/** Polls the delivery log until `check` holds for the delivery of `eventId`. */
async function settled(key: string, webhookId: string, eventId: string, status: string, timeoutMs = 8000) {
  return eventuallyValue(
    `the delivery of ${eventId} to be ${status}`,
    async () => (await deliveries(key, webhookId)).data.find((d: any) => d.event_id === eventId),
    (found) => found?.status === status,
    timeoutMs,
  );
}

describe("POST /webhooks and its siblings", () => {
  it("registers a webhook, shows the secret once, and lists, reads, updates and deletes it", async () => {
    const res = await api(p.baseUrl, "POST", "/webhooks", {
      key: acme.live,
      body: { url: rx.url("/crud"), events: ["order.created", "order.created", "api_key.revoked"], description: "orders" },
    });
    expect(res.status).toBe(201);
    const wh = res.body.data;
    expect(wh).toEqual({
      object: "webhook",
      id: expect.stringMatching(/^wh_[0-9a-z]{26}$/),
      url: rx.url("/crud"),
      events: ["order.created", "api_key.revoked"],
      description: "orders",
      status: "enabled",
      disabled_reason: null,
      environment: "live",
      consecutive_failures: 0,
      rate_limit: null,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/),
    });
    const got = await api(p.baseUrl, "GET", `/webhooks/${wh.id}`, { key: acme.live });
    expect(got.body.data.secret).toBeUndefined();
    expect(JSON.stringify(got.body)).not.toContain(wh.secret);
    const list = await api(p.baseUrl, "GET", "/webhooks", { key: acme.live });
    expect(list.body.data.map((w: any) => w.id)).toContain(wh.id);
    expect(JSON.stringify(list.body)).not.toContain(wh.secret);

    const patched = await api(p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: acme.live, body: { events: ["*"], description: null } });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({ events: ["*"], description: null, url: rx.url("/crud") });

    const deleted = await api(p.baseUrl, "DELETE", `/webhooks/${wh.id}`, { key: acme.live });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data.id).toBe(wh.id);
    expectError(await api(p.baseUrl, "GET", `/webhooks/${wh.id}`, { key: acme.live }), 404, "resource_not_found");
    expectError(await api(p.baseUrl, "DELETE", `/webhooks/${wh.id}`, { key: acme.live }), 404, "resource_not_found");
  });

  it("answers 404 for another organization's or environment's webhook, whatever the verb", async () => {
    const wh = await hook(acme.live, ["order.created"]);
    for (const key of [globex.live, acme.test]) {
      expectError(await api(p.baseUrl, "GET", `/webhooks/${wh.id}`, { key }), 404, "resource_not_found");
      expectError(await api(p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key, body: { status: "disabled" } }), 404, "resource_not_found");
      expectError(await api(p.baseUrl, "DELETE", `/webhooks/${wh.id}`, { key }), 404, "resource_not_found");
      expectError(await api(p.baseUrl, "POST", `/webhooks/${wh.id}/rotate-secret`, { key }), 404, "resource_not_found");
      expectError(await api(p.baseUrl, "GET", `/webhooks/${wh.id}/deliveries`, { key }), 404, "resource_not_found");
    }
    expect((await api(p.baseUrl, "GET", `/webhooks/${wh.id}`, { key: acme.live })).body.data.status).toBe("enabled");
  });

  it("refuses bad subscriptions and bodies with the parameter named", async () => {
    const post = (body: unknown) => api(p.baseUrl, "POST", "/webhooks", { key: acme.live, body });
    expectError(await post({ url: rx.url("/x"), events: ["workflow.exploded"] }), 400, "parameter_invalid", "events");
    expectError(await post({ url: rx.url("/x"), events: ["*", "order.created"] }), 400, "parameter_invalid", "events");
    expectError(await post({ url: rx.url("/x"), events: ["Not A Type"] }), 400, "parameter_invalid", "events");
    expectError(await post({ url: rx.url("/x"), events: [] }), 400, "parameter_invalid", "events");
    expectError(await post({ url: rx.url("/x") }), 400, "parameter_missing", "events");
    expectError(await post({ events: ["*"] }), 400, "parameter_missing", "url");
    expectError(await post({ url: "not a url", events: ["*"] }), 400, "parameter_invalid", "url");
    expectError(await post({ url: "ftp://example.com/x", events: ["*"] }), 400, "url_not_allowed", "url");
    expectError(await post({ url: rx.url("/x"), events: ["*"], secret: "mine" }), 400, "parameter_unknown", "secret");
    const wh = await hook(acme.live, ["*"]);
    expectError(
      await api(p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: acme.live, body: { status: "paused" } }),
      400,
      "parameter_invalid",
      "status",
    );
    const listed = await api(p.baseUrl, "GET", "/webhooks?per_page=100", { key: acme.live });
    expect(listed.body.data.every((w: any) => w.url !== "not a url")).toBe(true);
  });

  it("needs webhooks:read to read and webhooks:write to change", async () => {
    const reader = (await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "r", scopes: ["webhooks:read"] } })).body.data
      .key;
    expect((await api(p.baseUrl, "GET", "/webhooks", { key: reader })).status).toBe(200);
    const res = await api(p.baseUrl, "POST", "/webhooks", { key: reader, body: { url: rx.url("/x"), events: ["*"] } });
    expectError(res, 403, "insufficient_scope");
    expect(res.body.error.message).toContain("webhooks:write");
  });
});

describe("delivery", () => {
  it("sends each event to the webhooks that subscribe to it, signed, and to nobody else", async () => {
    const orders = await hook(acme.live, ["order.created"]);
    const everything = await hook(acme.live, ["*"]);
    const testEnv = await hook(acme.test, ["*"]);
    const otherOrg = await hook(globex.live, ["*"]);
    const order = await emit(acme.live, "order.created", { order_id: "o_9" });
    const signup = await emit(acme.live, "user.signed_up", { user: "u_1" });

    await rx.waitFor(() => rx.byPath(everything.path).length >= 2 && rx.byPath(orders.path).length >= 1, 5000);
    // An event's deliveries are all created before any is sent: with both events received by "*",
    // the delivery logs hold everyone they went to.
    expect((await deliveries(acme.live, orders.id)).data.map((d: any) => d.event_id)).toEqual([order.id]);
    expect((await deliveries(acme.test, testEnv.id)).data).toEqual([]);
    expect((await deliveries(globex.live, otherOrg.id)).data).toEqual([]);
    expect(rx.byPath(orders.path).map((r) => r.json.id)).toEqual([order.id]);
    expect(
      rx
        .byPath(everything.path)
        .map((r) => r.json.id)
        .sort(),
    ).toEqual([order.id, signup.id].sort());
    expect(rx.byPath(testEnv.path)).toEqual([]);
    expect(rx.byPath(otherOrg.path)).toEqual([]);

    const got = rx.byPath(orders.path)[0];
    expect(got.verified).toBe(true);
    expect(got.serviceSignatureOk).toBe(true);
    expect(got.standardSignatureOk).toBe(true);
    // Outside a rotation's overlap, exactly the spec's header: one `sha256=<hex>`.
    expect(got.headers["service-signature"]).toBe(serviceSignature(orders.secret, got.body));
    // The body is exactly the spec's payload, in its order, with millisecond timestamps.
    expect(got.body).toBe(JSON.stringify({ id: order.id, type: "order.created", created_at: order.created_at, data: { order_id: "o_9" } }));
    expect(got.headers["content-type"]).toBe("application/json");
    expect(got.headers["service-event"]).toBe("order.created");
    expect(got.headers["service-delivery"]).toMatch(/^del_[0-9a-z]{26}$/);
    expect(got.headers["webhook-id"]).toBe(got.headers["service-delivery"]);
    expect(Math.abs(Number(got.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(30);

    const log = await settled(acme.live, orders.id, order.id, "succeeded");
    expect(log).toMatchObject({
      id: got.headers["service-delivery"],
      event_type: "order.created",
      environment: "live",
      next_attempt_at: null,
    });
    expect(log.attempts).toEqual([
      { number: 1, at: expect.stringMatching(/Z$/), status_code: 200, duration_ms: expect.any(Number), error: null },
    ]);
    const one = await api(p.baseUrl, "GET", `/webhooks/${orders.id}/deliveries/${log.id}`, { key: acme.live });
    // The delivery alone has each attempt in full (the list, its summary) and the body sent.
    expect(one.body.data).toEqual({
      ...log,
      attempts: [
        {
          ...log.attempts[0],
          request: expect.objectContaining({ url: rx.url(orders.path) }),
          response: expect.objectContaining({ body: "ok" }),
        },
      ],
      payload: got.json,
    });
    // A delivery is found only under its own webhook and organization.
    expectError(
      await api(p.baseUrl, "GET", `/webhooks/${everything.id}/deliveries/${log.id}`, { key: acme.live }),
      404,
      "resource_not_found",
    );
    expectError(
      await api(p.baseUrl, "GET", `/webhooks/${orders.id}/deliveries/${log.id}`, { key: globex.live }),
      404,
      "resource_not_found",
    );
  });

  it("delivers system events such as api_key.revoked to subscribers", async () => {
    const keysHook = await hook(acme.live, ["api_key.revoked"]);
    const made = (await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "doomed", scopes: ["events:read"] } })).body
      .data;
    await api(p.baseUrl, "DELETE", `/api-keys/${made.id}`, { key: acme.live });
    const [got] = await rx.waitFor(() => rx.byPath(keysHook.path).length >= 1, 5000).then(() => rx.byPath(keysHook.path));
    expect(got.json).toMatchObject({ type: "api_key.revoked", data: { key_id: made.id, name: "doomed" } });
    expect(got.body).not.toContain(made.key.slice(9));
    expect(got.verified).toBe(true);
  });

  it("retries a receiver that fails twice, keeping the delivery id, and logs 3 attempts", async () => {
    const wh = await hook(acme.live, ["retry.me"]);
    rx.behave(wh.path, (n) => ({ status: n <= 2 ? 500 : 200 }));
    const event = await emit(acme.live, "retry.me");
    const log = await settled(acme.live, wh.id, event.id, "succeeded");
    expect(log.attempts.map((a: any) => [a.number, a.status_code])).toEqual([
      [1, 500],
      [2, 500],
      [3, 200],
    ]);
    expect(log.attempts[0].error).toContain("500");
    for (const a of log.attempts) expect(a.duration_ms).toBeGreaterThanOrEqual(0);
    const got = rx.byPath(wh.path);
    expect(got).toHaveLength(3);
    expect(new Set(got.map((r) => r.headers["service-delivery"]))).toEqual(new Set([log.id]));
    expect(got.every((r) => r.verified)).toBe(true);
    // The backoff waited between attempts.
    expect(got[1].at - got[0].at).toBeGreaterThanOrEqual(50);
  });

  it("gives up after 5 attempts at a receiver that never answers, each timed out", async () => {
    const wh = await hook(acme.live, ["hang.up"]);
    rx.behave(wh.path, () => ({ hang: true }));
    const event = await emit(acme.live, "hang.up");
    const log = await settled(acme.live, wh.id, event.id, "failed", 10_000);
    expect(log.attempts).toHaveLength(5);
    for (const a of log.attempts) {
      expect(a.status_code).toBeNull();
      expect(a.error).toContain("300 ms");
      expect(a.duration_ms).toBeGreaterThanOrEqual(280);
    }
    expect(log.next_attempt_at).toBeNull();
    expect(rx.byPath(wh.path)).toHaveLength(5);
  });

  it("counts an answer slower than the time-out as a failure", async () => {
    const wh = await hook(acme.live, ["slow.poke"]);
    rx.behave(wh.path, (n) => (n === 1 ? { delayMs: 600, status: 200 } : { status: 200 }));
    const event = await emit(acme.live, "slow.poke");
    const log = await settled(acme.live, wh.id, event.id, "succeeded");
    expect(log.attempts.map((a: any) => a.status_code)).toEqual([null, 200]);
    expect(log.attempts[0].error).toContain("300 ms");
  });

  it("keeps delivering to healthy receivers while another one hangs", async () => {
    const dead = await hook(acme.live, ["busy.day"]);
    const healthy = await hook(acme.live, ["busy.day"]);
    rx.behave(dead.path, () => ({ hang: true }));
    for (let i = 0; i < 40; i++) await emit(acme.live, "busy.day", { i });
    await rx.waitFor(() => rx.byPath(healthy.path).length >= 40, 10_000);
    // Each event's healthy delivery arrived before its delivery to the dead receiver timed out
    // (300 ms after it was sent): none waited behind a hanging attempt. Measured against the
    // dispatcher's own sends, so a slow machine does not decide it.
    const firstAt = (path: string) => {
      const at = new Map<number, number>();
      for (const r of rx.byPath(path)) if (!at.has(r.json.data.i)) at.set(r.json.data.i, r.at);
      return at;
    };
    const [toDead, toHealthy] = [firstAt(dead.path), firstAt(healthy.path)];
    expect(toHealthy.size).toBe(40);
    for (const [i, at] of toHealthy) {
      const deadSent = toDead.get(i);
      // A dead delivery not even sent yet waits for one of its webhook's 32 slots: no bound on that one.
      if (deadSent !== undefined) expect({ i, lag: at - deadSent < 300 }).toEqual({ i, lag: true });
    }
    // The dead receiver holds at most 32 attempts at once, so later events reached it only after time-outs.
    expect(toDead.size).toBeGreaterThanOrEqual(32);
    expect(rx.byPath(healthy.path).every((r) => r.verified)).toBe(true);
  });

  it("redelivers a settled delivery on request under the same id, and refuses one still pending", async () => {
    const wh = await hook(acme.live, ["again.please"]);
    const event = await emit(acme.live, "again.please");
    const first = await settled(acme.live, wh.id, event.id, "succeeded");
    const res = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/${first.id}/redeliver`, { key: acme.live });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: first.id, status: "pending" });
    await rx.waitFor(() => rx.byPath(wh.path).length >= 2, 5000);
    expect(rx.byPath(wh.path).map((r) => r.headers["service-delivery"])).toEqual([first.id, first.id]);
    const after = await settled(acme.live, wh.id, event.id, "succeeded");
    expect(after.attempts.map((a: any) => a.number)).toEqual([1, 2]);

    rx.behave(wh.path, () => ({ hang: true }));
    const stuck = await emit(acme.live, "again.please");
    // Logged once its first attempt ends (here: times out) or after at most a second.
    const pending = await settled(acme.live, wh.id, stuck.id, "pending");
    const conflict = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/${pending.id}/redeliver`, { key: acme.live });
    expectError(conflict, 409, "invalid_state");
    expectError(
      await api(p.baseUrl, "POST", `/webhooks/${wh.id}/deliveries/del_nope/redeliver`, { key: acme.live }),
      404,
      "resource_not_found",
    );
  });

  it("disables a webhook after 10 deliveries in a row fail, emits webhook.disabled, and re-enables on PATCH", async () => {
    const broken = await hook(acme.live, ["doomed.type"]);
    const watcher = await hook(acme.live, ["webhook.disabled"]);
    rx.behave(broken.path, () => ({ status: 503 }));
    for (let i = 0; i < 10; i++) await emit(acme.live, "doomed.type", { i });
    const state = await eventuallyValue(
      "the webhook disabled",
      async () => (await api(p.baseUrl, "GET", `/webhooks/${broken.id}`, { key: acme.live })).body.data,
      (s) => s.status === "disabled",
      10_000,
    );
    expect(state).toMatchObject({ status: "disabled", consecutive_failures: 10 });
    expect(state.disabled_reason).toContain("10 deliveries");
    const failed = await deliveries(acme.live, broken.id, "&status=failed");
    expect(failed.meta.total).toBe(10);

    // (Webhooks of earlier tests whose receivers hang may be disabled meanwhile too.)
    await rx.waitFor(() => rx.byPath(watcher.path).some((r) => r.json.data.webhook_id === broken.id), 5000);
    const told = rx.byPath(watcher.path).filter((r) => r.json.data.webhook_id === broken.id);
    expect(told).toHaveLength(1);
    expect(told[0].json).toMatchObject({ type: "webhook.disabled", data: { webhook_id: broken.id } });
    const logged = await api(p.baseUrl, "GET", "/events?type=webhook.disabled&per_page=100", { key: acme.live });
    expect(logged.body.data.filter((e: any) => e.data.webhook_id === broken.id)).toEqual([
      expect.objectContaining({ source: "webhooks", id: told[0].json.id }),
    ]);

    // Disabled: new events are not delivered to it. A webhook on the same type shows the event was fanned out.
    const sent = rx.byPath(broken.path).length;
    const witness = await hook(acme.live, ["doomed.type"]);
    const late = await emit(acme.live, "doomed.type", { late: true });
    await rx.waitFor(() => rx.byPath(witness.path).some((r) => r.json.id === late.id), 5000);
    expect((await deliveries(acme.live, broken.id)).data.filter((d: any) => d.event_id === late.id)).toEqual([]);
    expect(rx.byPath(broken.path).length).toBe(sent);
    expectError(
      await api(p.baseUrl, "POST", `/webhooks/${broken.id}/deliveries/${failed.data[0].id}/redeliver`, { key: acme.live }),
      409,
      "invalid_state",
    );

    rx.behave(broken.path, () => ({ status: 200 }));
    const enabled = await api(p.baseUrl, "PATCH", `/webhooks/${broken.id}`, { key: acme.live, body: { status: "enabled" } });
    expect(enabled.body.data).toMatchObject({ status: "enabled", disabled_reason: null, consecutive_failures: 0 });
    const back = await emit(acme.live, "doomed.type", { back: true });
    await settled(acme.live, broken.id, back.id, "succeeded");
  });

  it("signs with the old secret beside the new one for a while after a rotation", async () => {
    const wh = await hook(acme.live, ["rotate.test"]);
    const oldSecret: string = wh.secret;
    const rotated = await api(p.baseUrl, "POST", `/webhooks/${wh.id}/rotate-secret`, { key: acme.live });
    expect(rotated.status).toBe(200);
    const newSecret: string = rotated.body.data.secret;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(oldSecret);
    expect((await api(p.baseUrl, "GET", `/webhooks/${wh.id}`, { key: acme.live })).body.data.secret).toBeUndefined();

    rx.setSecret(wh.path, newSecret);
    await emit(acme.live, "rotate.test", { n: 1 });
    await rx.waitFor(() => rx.byPath(wh.path).length >= 1, 5000);
    const [got] = rx.byPath(wh.path);
    expect(got.verified).toBe(true);
    // Both headers carry both secrets' signatures, the new one first: a receiver still configured
    // with the old secret keeps verifying during the overlap, whichever header it checks.
    expect(got.headers["service-signature"]).toBe(`${serviceSignature(newSecret, got.body)}, ${serviceSignature(oldSecret, got.body)}`);
    const values = got.headers["webhook-signature"].split(" ");
    const ts = Number(got.headers["webhook-timestamp"]);
    expect(values).toHaveLength(2);
    expect(values).toContain(standardSignature([oldSecret], got.headers["webhook-id"], ts, got.body));
    expect(values).toContain(standardSignature([newSecret], got.headers["webhook-id"], ts, got.body));
  });

  it("keeps a Service-Signature receiver on the old secret and one on the new verifying through the overlap", async () => {
    const onOld = await hook(acme.live, ["rotate.both"]);
    const onNew = await hook(acme.live, ["rotate.both"]);
    const rotate = async (wh: { id: string }) =>
      (await api(p.baseUrl, "POST", `/webhooks/${wh.id}/rotate-secret`, { key: acme.live })).body.data.secret as string;
    // One receiver keeps the old secret, the other switches at once.
    rx.setSecret(onOld.path, onOld.secret);
    await rotate(onOld);
    rx.setSecret(onNew.path, await rotate(onNew));
    await emit(acme.live, "rotate.both", { n: 1 });
    await rx.waitFor(() => rx.byPath(onOld.path).length >= 1 && rx.byPath(onNew.path).length >= 1, 5000);
    for (const path of [onOld.path, onNew.path]) {
      const [got] = rx.byPath(path);
      expect(got.serviceSignatureOk).toBe(true);
      expect(got.verified).toBe(true);
    }
    // A second rotation retires the first secret at once: the header carries the newest two only.
    const third = await rotate(onNew);
    await emit(acme.live, "rotate.both", { n: 2 });
    await rx.waitFor(() => rx.byPath(onNew.path).length >= 2, 5000);
    const later = rx.byPath(onNew.path)[1];
    expect(later.headers["service-signature"].split(", ")).toHaveLength(2);
    expect(later.headers["service-signature"]).toContain(serviceSignature(third, later.body));
    expect(later.headers["service-signature"]).not.toContain(serviceSignature(onNew.secret, later.body));
  });

  it("drops a deleted webhook's deliveries and sends it nothing more", async () => {
    const wh = await hook(acme.live, ["gone.soon"]);
    const event = await emit(acme.live, "gone.soon");
    await settled(acme.live, wh.id, event.id, "succeeded");
    await api(p.baseUrl, "DELETE", `/webhooks/${wh.id}`, { key: acme.live });
    expectError(await api(p.baseUrl, "GET", `/webhooks/${wh.id}/deliveries`, { key: acme.live }), 404, "resource_not_found");
    // A webhook on the same type shows the next event was fanned out.
    const witness = await hook(acme.live, ["gone.soon"]);
    const next = await emit(acme.live, "gone.soon");
    await rx.waitFor(() => rx.byPath(witness.path).some((r) => r.json.id === next.id), 5000);
    expect(rx.byPath(wh.path)).toHaveLength(1);
  });
});

describe("webhook URL rules (WEBHOOK_ALLOW_PRIVATE_TARGETS unset)", () => {
  let strict: Platform;
  let org: { live: string; test: string };
  beforeAll(async () => {
    strict = await startPlatform();
    org = await strict.createOrg("Strict");
  });
  afterAll(() => strict.stop());
  const post = (key: string, url: string) => api(strict.baseUrl, "POST", "/webhooks", { key, body: { url, events: ["order.created"] } });

  it.each([
    ["https://127.0.0.1/hook"],
    ["https://localhost/hook"],
    ["https://[::1]/hook"],
    ["https://10.1.2.3/hook"],
    ["https://172.16.0.9/hook"],
    ["https://192.168.1.1/hook"],
    ["https://169.254.169.254/latest/meta-data"],
    ["https://100.64.0.1/hook"],
    ["https://[::ffff:127.0.0.1]/hook"],
    ["https://[fd00::1]/hook"],
    ["https://0.0.0.0/hook"],
  ])("refuses the private target %s", async (url) => {
    expectError(await post(org.live, url), 400, "url_not_allowed", "url");
  });

  it("takes https to a public address, and http only in the test environment", async () => {
    expect((await post(org.live, "https://93.184.215.14/hook")).status).toBe(201);
    expectError(await post(org.live, "http://93.184.215.14/hook"), 400, "url_not_allowed", "url");
    expect((await post(org.test, "http://93.184.215.14/hook")).status).toBe(201);
    expectError(await post(org.test, "http://127.0.0.1/hook"), 400, "url_not_allowed", "url");
  });

  it("refuses credentials in the URL and names that do not resolve", async () => {
    expectError(await post(org.live, "https://user:pw@93.184.215.14/hook"), 400, "parameter_invalid", "url");
    expectError(await post(org.live, "https://no-such-host.invalid/hook"), 400, "url_not_allowed", "url");
  });

  it("applies the rules to PATCH too", async () => {
    const wh = (await post(org.live, "https://93.184.215.14/hook")).body.data;
    expectError(
      await api(strict.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: org.live, body: { url: "https://127.0.0.1/x" } }),
      400,
      "url_not_allowed",
      "url",
    );
    expect((await api(strict.baseUrl, "GET", `/webhooks/${wh.id}`, { key: org.live })).body.data.url).toBe("https://93.184.215.14/hook");
  });
});
