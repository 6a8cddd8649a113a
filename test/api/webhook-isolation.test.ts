import { outbound, outboundAgent } from "../../shared/outbound";
import { api, expectError, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * Isolation per webhook and the per-webhook throttle, through the gateway, to real receivers on
 * 127.0.0.1. Every receiver of a suite shares one host:port, as customers of one SaaS do.
 * Timing bounds are fractions of the attempt time-out, which is what a shared pool used to cost.
 */
// Long enough that no hanging attempt times out while a test's healthy deliveries are sent: the
// burst of work when hundreds time out at once is CPU the healthy ones share, not a wait for them.
const TIMEOUT_MS = 8000;
const SETTINGS = {
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  // Long enough that no retry comes within a test: each test sees first attempts only.
  WEBHOOK_RETRY_DELAYS_MS: "600000,600000,600000,600000",
  RATE_LIMIT_MAX: "100000",
};
/** Connections (and attempts at once) one webhook gets from a dispatcher node. */
const PER_WEBHOOK = 32;

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
// Before the platform stops: hanging receivers let go first, so the attempts in flight end at once.
afterAll(() => rx.close());
const suite = usePlatform(SETTINGS);

let paths = 0;
/** A webhook on the shared receiver (its own path), and its deliveries checked against its secret. */
async function hook(key: string, events: string[], extra: Record<string, unknown> = {}) {
  const path = `/iso${++paths}`;
  const res = await api(suite.p.baseUrl, "POST", "/webhooks", { key, body: { url: rx.url(path), events, ...extra } });
  expect(res.status).toBe(201);
  rx.setSecret(path, res.body.data.secret);
  return { path, ...res.body.data } as { path: string; id: string; rate_limit: number | null };
}
/** `count` events of `type`, one after another, each with its number and when it was sent. */
async function emitMany(key: string, type: string, count: number) {
  for (let i = 0; i < count; i++) {
    const res = await api(suite.p.baseUrl, "POST", "/events", { key, body: { type, data: { i, sent: Date.now() } } });
    expect(res.status).toBe(201);
  }
}
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

/**
 * `hanging` webhooks of Acme that never answer, each with `perHanging` deliveries (its whole
 * connection budget busy and more queued), then `healthy` events to a webhook of Globex on the same
 * host:port: every one arrives, and none waited for a hanging attempt's time-out.
 */
async function healthyBesideHanging(hanging: number, perHanging: number, healthy: number) {
  const type = `hang${hanging}.it`;
  const dead: { path: string }[] = [];
  for (let i = 0; i < hanging; i++) {
    const wh = await hook(suite.acme.live, [type]);
    rx.behave(wh.path, () => ({ hang: true }));
    dead.push(wh);
  }
  const good = await hook(suite.globex.live, [`fine${hanging}.it`]);
  await emitMany(suite.acme.live, type, perHanging);
  // Every hanging webhook's whole budget is taken before the healthy deliveries start.
  const busy = hanging * Math.min(perHanging, PER_WEBHOOK);
  await rx.waitFor(() => dead.reduce((n, wh) => n + rx.byPath(wh.path).length, 0) >= busy, 20_000);

  await emitMany(suite.globex.live, `fine${hanging}.it`, healthy);
  await rx.waitFor(() => rx.byPath(good.path).length >= healthy, 20_000);

  const got = rx.byPath(good.path);
  expect(new Set(got.map((r) => r.json.data.i)).size).toBe(healthy);
  expect(got.every((r) => r.verified)).toBe(true);
  const lags = got.map((r) => r.at - r.json.data.sent).sort((a, b) => a - b);
  // Behind a shared pool these waited for a hanging attempt to time out (about TIMEOUT_MS each).
  expect(quantile(lags, 0.99)).toBeLessThan(TIMEOUT_MS / 8);
  expect(lags[lags.length - 1]).toBeLessThan(TIMEOUT_MS / 4);
  return lags;
}

describe("isolation per webhook", () => {
  it("delivers another organization's webhook on the same host promptly while one webhook hangs with 50 deliveries", async () => {
    await healthyBesideHanging(1, 50, 100);
  });

  it("delivers it promptly beside 20 hanging webhooks on the same host, every delivery", async () => {
    await healthyBesideHanging(20, 40, 200);
  });

  it("starts an attempt's time-out when it is sent, not while it waits for its webhook's own connections", async () => {
    // Each answer takes 60 % of the time-out; twice the webhook's budget queued means the second
    // half waits one whole answer, so from the event they take longer than the time-out.
    const slow = await hook(suite.acme.live, ["slow.batch"]);
    rx.behave(slow.path, () => ({ delayMs: TIMEOUT_MS * 0.6 }));
    const events = PER_WEBHOOK * 2;
    const started = Date.now();
    await emitMany(suite.acme.live, "slow.batch", events);
    await rx.waitFor(() => rx.byPath(slow.path).length >= events, 20_000);
    const waited = rx.byPath(slow.path).filter((r) => r.at - started >= TIMEOUT_MS * 0.5);
    expect(waited.length).toBeGreaterThan(0);
    // Every delivery succeeds at its first attempt: none was timed out for its wait.
    const deadline = Date.now() + 20_000;
    let log: any[] = [];
    while (Date.now() < deadline) {
      log = (await api(suite.p.baseUrl, "GET", `/webhooks/${slow.id}/deliveries?per_page=100`, { key: suite.acme.live })).body.data;
      if (log.length === events && log.every((d) => d.status !== "pending")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(log.map((d) => [d.status, d.attempts.length])).toEqual(Array.from({ length: events }, () => ["succeeded", 1]));
    expect(rx.byPath(slow.path).length).toBe(events);
  });

  it("closes a webhook's connections when it is deleted, and keeps another webhook's on the same host", async () => {
    const gone = await hook(suite.acme.live, ["pool.x"]);
    const kept = await hook(suite.globex.live, ["pool.x"]);
    await emitMany(suite.acme.live, "pool.x", 1);
    await emitMany(suite.globex.live, "pool.x", 1);
    await rx.waitFor(() => rx.byPath(gone.path).length === 1 && rx.byPath(kept.path).length === 1);
    const [goneConn, keptConn] = [rx.byPath(gone.path)[0].connection, rx.byPath(kept.path)[0].connection];
    // Each webhook has connections of its own, even to the same host:port.
    expect(goneConn).not.toBe(keptConn);
    expect(rx.closedAt(goneConn)).toBeUndefined();
    expect((await api(suite.p.baseUrl, "DELETE", `/webhooks/${gone.id}`, { key: suite.acme.live })).status).toBe(200);
    // Well before the 10 s a keep-alive connection idles out: closed with its webhook.
    await rx.waitFor(() => rx.closedAt(goneConn) !== undefined, 5000);
    expect(rx.closedAt(keptConn)).toBeUndefined();
  });

  it("times a request queued behind busy connections of its own pool from its send (shared/outbound.ts)", async () => {
    // One connection, three requests of 300 ms each with a 500 ms time-out: the third waits 600 ms
    // for the connection, and still succeeds.
    rx.behave("/one-at-a-time", () => ({ delayMs: 300 }));
    rx.setSecret("/one-at-a-time", "whsec_none");
    const agent = outboundAgent(true, { connections: 1 });
    try {
      const send = () =>
        outbound(agent, rx.url("/one-at-a-time"), { method: "POST", headers: {}, body: "{}", timeoutMs: 500, waitMs: 5000, keep: 0 });
      const results = await Promise.all([send(), send(), send()]);
      // Unsigned, the receiver answers 400: an answer, not a time-out.
      expect(results.map((r) => r.answered)).toEqual([true, true, true]);
      expect(Math.max(...results.map((r) => r.ms))).toBeGreaterThan(500);
      // Counted from the queue instead, the same requests time out.
      const counted = await Promise.all(
        [0, 1, 2].map(() =>
          outbound(agent, rx.url("/one-at-a-time"), { method: "POST", headers: {}, body: "{}", timeoutMs: 500, keep: 0 }),
        ),
      );
      expect(counted.some((r) => !r.answered && r.error === "no answer within 500 ms")).toBe(true);
      // And a request that never gets its connection is bounded by waitMs.
      rx.behave("/one-at-a-time", () => ({ hang: true }));
      const [, stuck] = await Promise.all([
        send(),
        outbound(agent, rx.url("/one-at-a-time"), { method: "POST", headers: {}, body: "{}", timeoutMs: 5000, waitMs: 200, keep: 0 }),
      ]);
      expect(stuck).toMatchObject({ answered: false, error: "no connection within 200 ms" });
    } finally {
      await agent.destroy();
    }
  });
});

describe("rate_limit", () => {
  it("is set on create and update, validated, and shown on read", async () => {
    const wh = await hook(suite.acme.live, ["limits.x"], { rate_limit: 5 });
    expect(wh.rate_limit).toBe(5);
    expect((await api(suite.p.baseUrl, "GET", `/webhooks/${wh.id}`, { key: suite.acme.live })).body.data.rate_limit).toBe(5);
    const patch = (body: unknown) => api(suite.p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: suite.acme.live, body });
    expect((await patch({ rate_limit: 12 })).body.data.rate_limit).toBe(12);
    expect((await patch({ description: "kept" })).body.data.rate_limit).toBe(12);
    expect((await patch({ rate_limit: null })).body.data.rate_limit).toBeNull();
    expect((await hook(suite.acme.live, ["limits.x"])).rate_limit).toBeNull();
    for (const bad of [0, -1, 1.5, "5", 10_001, true]) {
      expectError(await patch({ rate_limit: bad }), 400, "parameter_invalid", "rate_limit");
      const created = await api(suite.p.baseUrl, "POST", "/webhooks", {
        key: suite.acme.live,
        body: { url: rx.url("/never"), events: ["*"], rate_limit: bad },
      });
      expectError(created, 400, "parameter_invalid", "rate_limit");
    }
    // Refused, so not half-applied.
    expect((await api(suite.p.baseUrl, "GET", `/webhooks/${wh.id}`, { key: suite.acme.live })).body.data.rate_limit).toBeNull();
  });

  it("sends a throttled webhook at most rate_limit deliveries per second, and all of them in the end", async () => {
    const limit = 5;
    const events = 30;
    const throttled = await hook(suite.acme.live, ["throttle.x"], { rate_limit: limit });
    const free = await hook(suite.acme.live, ["throttle.x"]);
    await emitMany(suite.acme.live, "throttle.x", events);
    // Unthrottled, the same events arrive at once; the throttled ones keep coming for about events/limit s.
    await rx.waitFor(() => rx.byPath(free.path).length >= events, 10_000);
    await rx.waitFor(() => rx.byPath(throttled.path).length >= events, (events / limit) * 1000 * 3);
    const got = rx.byPath(throttled.path);
    expect(new Set(got.map((r) => r.json.data.i)).size).toBe(events);
    expect(got.every((r) => r.verified)).toBe(true);
    const at = got.map((r) => r.at).sort((a, b) => a - b);
    // Sent at least 1/limit s apart; arrivals may bunch by a few ms of the receiver's own jitter.
    for (let i = 0; i + limit + 1 < at.length; i++) {
      expect({ i, window: at[i + limit + 1] - at[i] >= 1000 }).toEqual({ i, window: true });
    }
    const rate = ((at.length - 1) * 1000) / (at[at.length - 1] - at[0]);
    expect(rate).toBeLessThanOrEqual(limit * 1.05);
    // And the throttle does not starve it: near the limit, not far below it.
    expect(rate).toBeGreaterThan(limit * 0.8);
    console.log(`throttle on one dispatcher: rate_limit ${limit}/s, measured ${rate.toFixed(2)}/s at the receiver`);
  });

  it("honours a rate_limit added by PATCH", async () => {
    const wh = await hook(suite.acme.live, ["relimit.x"]);
    const patched = await api(suite.p.baseUrl, "PATCH", `/webhooks/${wh.id}`, { key: suite.acme.live, body: { rate_limit: 4 } });
    expect(patched.body.data.rate_limit).toBe(4);
    await emitMany(suite.acme.live, "relimit.x", 12);
    await rx.waitFor(() => rx.byPath(wh.path).length >= 12, 15_000);
    const at = rx
      .byPath(wh.path)
      .map((r) => r.at)
      .sort((a, b) => a - b);
    expect(((at.length - 1) * 1000) / (at[at.length - 1] - at[0])).toBeLessThanOrEqual(4 * 1.05);
  });
});
