import { api, expectError, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";
import { eventuallyValue } from "../../tools/eventually";

// Retries an hour apart: a failing endpoint's deliveries stay pending for the whole suite.
const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_TIMEOUT_MS: "3000",
  WEBHOOK_RETRY_DELAYS_MS: "3600000,3600000,3600000,3600000",
});
let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(() => rx.close());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** /analytics/webhooks once `done` holds (counts are written as deliveries progress). */
async function webhookAnalytics(key: string, done: (body: any) => boolean, query = ""): Promise<any> {
  const res = await eventuallyValue(
    "the webhook analytics",
    () => api(suite.p.baseUrl, "GET", `/analytics/webhooks${query}`, { key }),
    (r) => r.status !== 200 || done(r.body.data),
    8000,
  );
  expect(res.status).toBe(200);
  return res.body.data;
}
const of = (body: any, id: string) => body.webhooks.find((w: any) => w.webhook_id === id);

describe("GET /analytics/webhooks", () => {
  let good: { id: string; secret: string };
  let failing: { id: string };

  it("shows a failing endpoint's pending deliveries as failed attempts, and a success rate below 100 %", async () => {
    const key = suite.acme.live;
    good = (await api(suite.p.baseUrl, "POST", "/webhooks", { key, body: { url: rx.url("/good"), events: ["o.tick"] } })).body.data;
    rx.setSecret("/good", good.secret);
    failing = (await api(suite.p.baseUrl, "POST", "/webhooks", { key, body: { url: rx.url("/failing"), events: ["o.tick"] } })).body.data;
    rx.behave("/failing", () => ({ status: 500 }));
    for (let i = 0; i < 3; i++)
      expect((await api(suite.p.baseUrl, "POST", "/events", { key, body: { type: "o.tick", data: { i } } })).status).toBe(201);

    const body = await webhookAnalytics(key, (b) => b.attempt_counts.total >= 6);
    // Every delivery to the failing endpoint is still pending (its next attempt is an hour away)...
    const pending = await api(suite.p.baseUrl, "GET", `/webhooks/${failing.id}/deliveries?status=pending`, { key });
    expect(pending.body.meta.total).toBe(3);
    // ...and its failed attempts count: half the attempts failed. Over settled deliveries only,
    // the rate would still read 100 %.
    expect(body).toMatchObject({
      total: 6,
      by_status: { pending: 3, succeeded: 3, failed: 0 },
      attempt_counts: { total: 6, succeeded: 3, failed: 3 },
      success_rate: 0.5,
      delivery_success_rate: 1,
    });
    expect(of(body, failing.id)).toEqual({
      webhook_id: failing.id,
      total: 3,
      by_status: { pending: 3, succeeded: 0, failed: 0 },
      success_rate: 0,
      attempt_counts: { total: 3, succeeded: 0, failed: 3 },
      delivery_success_rate: null,
    });
    expect(of(body, good.id)).toMatchObject({
      total: 3,
      by_status: { pending: 0, succeeded: 3 },
      success_rate: 1,
      delivery_success_rate: 1,
    });
    // Another organization, and the other environment, count nothing of it.
    expect((await webhookAnalytics(suite.globex.live, () => true)).total).toBe(0);
    expect((await webhookAnalytics(suite.acme.test, () => true)).total).toBe(0);
  });

  it("counts a redelivery as pending until it settles again, with its attempt", async () => {
    const key = suite.acme.live;
    const [first] = (await api(suite.p.baseUrl, "GET", `/webhooks/${good.id}/deliveries`, { key })).body.data;
    // The receiver takes 1.5 s to answer the redelivery (its time-out is 3 s).
    rx.behave("/good", () => ({ delayMs: 1500 }));
    expect((await api(suite.p.baseUrl, "POST", `/webhooks/${good.id}/deliveries/${first.id}/redeliver`, { key })).status).toBe(200);
    const during = await webhookAnalytics(key, () => true);
    expect(of(during, good.id)).toMatchObject({
      total: 3,
      by_status: { pending: 1, succeeded: 2, failed: 0 },
      attempt_counts: { total: 3, succeeded: 3 },
    });

    const after = await webhookAnalytics(key, (b) => of(b, good.id).by_status.pending === 0);
    expect(of(after, good.id)).toMatchObject({
      total: 3,
      by_status: { pending: 0, succeeded: 3, failed: 0 },
      attempt_counts: { total: 4, succeeded: 4, failed: 0 },
    });
    rx.behave("/good", () => ({}));
  });

  it("drops a webhook's counts with its delivery log when it is deleted", async () => {
    const key = suite.acme.live;
    expect((await api(suite.p.baseUrl, "DELETE", `/webhooks/${failing.id}`, { key })).status).toBe(200);
    const body = await webhookAnalytics(key, (b) => !of(b, failing.id));
    expect(of(body, failing.id)).toBeUndefined();
    expect(body.by_status.pending + body.by_status.succeeded + body.by_status.failed).toBe(3);
  });

  it("answers the window it counted, in whole hours (whole days before the hour rows' 90 days)", async () => {
    const key = suite.acme.live;
    const now = Date.now();
    const hour = now - (now % HOUR);
    const recent = await api(
      suite.p.baseUrl,
      "GET",
      `/analytics/webhooks?from=${new Date(hour - 30 * HOUR + 90_000).toISOString()}&to=${new Date(hour - 2 * HOUR + 60_000).toISOString()}`,
      { key },
    );
    expect(recent.body.data).toMatchObject({
      from: new Date(hour - 30 * HOUR).toISOString(),
      to: new Date(hour - HOUR).toISOString(),
      total: 0,
    });

    const day = now - (now % DAY);
    const old = await api(
      suite.p.baseUrl,
      "GET",
      `/analytics/workflows?from=${new Date(day - 120 * DAY + 5 * HOUR).toISOString()}&to=${new Date(day - 100 * DAY + 7 * HOUR).toISOString()}`,
      { key },
    );
    expect(old.body.data).toMatchObject({
      from: new Date(day - 120 * DAY).toISOString(),
      to: new Date(day - 99 * DAY).toISOString(),
      total: 0,
      workflows: [],
    });

    expectError(
      await api(suite.p.baseUrl, "GET", `/analytics/webhooks?from=${new Date(now - 91 * DAY).toISOString()}`, { key }),
      400,
      "parameter_invalid",
      "from",
    );
    expectError(await api(suite.p.baseUrl, "GET", "/analytics/webhooks?to=2026-99-01", { key }), 400, "parameter_invalid", "to");
  });
});
