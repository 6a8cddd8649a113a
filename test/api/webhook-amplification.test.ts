import { waitFor } from "../../tools/procs";
import { RECOVER_BATCH } from "../../services/webhook-dispatcher/recovery.mixin";
import { DISABLE_AFTER_FAILURES } from "../../shared/records/deliveries";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * What a user's call can make the platform send to a receiver that still fails: sends started by
 * hand (a recovery, redeliveries, test events) count toward the auto-disable from their first
 * failed attempt and are paced per webhook, so one call never turns into thousands of requests
 * (docs/webhooks-amplification.md).
 */

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(() => rx.close());

// Retries a second apart: long enough that a batch's first attempts are all counted before any
// retry falls due, short enough that the 300 deliveries of the setup fail within seconds.
const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_TIMEOUT_MS: "5000",
  WEBHOOK_RETRY_DELAYS_MS: "1000,1000,1000,1000",
  RATE_LIMIT_MAX: "100000",
});

const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });
const total = async (path: string) => (await call("GET", path)).body.meta.total as number;

/** A webhook whose 300 deliveries all failed (it was disabled on the way), its receiver still failing. */
async function failedWebhook(path: string, type: string, n = 300) {
  const res = await call("POST", "/webhooks", { url: rx.url(path), events: [type] });
  expect(res.status).toBe(201);
  const wh = res.body.data;
  rx.setSecret(path, wh.secret);
  // Held at the receiver until every delivery is stored, then failed.
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  rx.behave(path, () => ({ status: 500, gate }));
  for (let i = 0; i < n; i += 25) {
    const sent = await Promise.all(
      Array.from({ length: Math.min(25, n - i) }, (_, j) => call("POST", "/events", { type, data: { i: i + j } })),
    );
    for (const r of sent) expect(r.status).toBe(201);
  }
  await waitFor(`${n} deliveries stored`, async () => (await total(`/webhooks/${wh.id}/deliveries?per_page=1`)) === n);
  rx.behave(path, () => ({ status: 500 }));
  open();
  await waitFor(`all ${n} to fail`, async () => (await total(`/webhooks/${wh.id}/deliveries?status=failed&per_page=1`)) === n, 60_000);
  expect((await call("GET", `/webhooks/${wh.id}`)).body.data.status).toBe("disabled");
  return wh;
}

describe("sends started by hand to a receiver that still fails", () => {
  it(`re-enable + recover of 300 failed deliveries sends at most ${RECOVER_BATCH} requests, then the job stops`, async () => {
    const path = "/still-broken";
    const wh = await failedWebhook(path, "sync.broken");
    const before = rx.byPath(path).length;

    expect((await call("PATCH", `/webhooks/${wh.id}`, { status: "enabled" })).status).toBe(200);
    const started = await call("POST", `/webhooks/${wh.id}/recover`, { since: "2020-01-01T00:00:00Z" });
    expect(started.status).toBe(202);
    expect(started.body.data.total).toBe(300);
    const job = started.body.data.id;
    await waitFor("the job to stop", async () => (await call("GET", `/webhooks/${wh.id}/recover/${job}`)).body.data.status !== "running");
    // Every redelivered delivery settles: the retries of the batch fall due after the disable.
    await waitFor("no delivery left pending", async () => (await total(`/webhooks/${wh.id}/deliveries?status=pending&per_page=1`)) === 0);

    const sent = rx.byPath(path).length - before;
    console.log(`re-enable + recover of 300 failed deliveries: ${sent} requests to the receiver (bound ${RECOVER_BATCH})`);
    expect(sent).toBeLessThanOrEqual(RECOVER_BATCH);
    expect(sent).toBeGreaterThan(0);
    expect((await call("GET", `/webhooks/${wh.id}/recover/${job}`)).body.data).toMatchObject({
      status: "stopped",
      done: RECOVER_BATCH,
      finished_at: expect.any(String),
    });
    const webhook = (await call("GET", `/webhooks/${wh.id}`)).body.data;
    expect(webhook).toMatchObject({ status: "disabled", consecutive_failures: DISABLE_AFTER_FAILURES });
    expect(await total(`/webhooks/${wh.id}/deliveries?status=failed&per_page=1`)).toBe(300);
  }, 120_000);

  it("a burst of redeliveries is paced per webhook and stops at the auto-disable", async () => {
    const path = "/redelivered";
    const wh = await failedWebhook(path, "sync.redelivered", 30);
    const ids: string[] = (await call("GET", `/webhooks/${wh.id}/deliveries?per_page=30`)).body.data.map((d: { id: string }) => d.id);
    const before = rx.byPath(path).length;

    expect((await call("PATCH", `/webhooks/${wh.id}`, { status: "enabled" })).status).toBe(200);
    const answers = await Promise.all(ids.map((id) => call("POST", `/webhooks/${wh.id}/deliveries/${id}/redeliver`)));
    expect(answers.map((a) => a.status)).toEqual(ids.map(() => 200));
    // Each waits for the webhook's next slot for sends started by hand.
    const due = answers.map((a) => Date.parse(a.body.data.next_attempt_at)).sort((a, b) => a - b);
    expect(due[due.length - 1] - due[0]).toBeGreaterThanOrEqual(((ids.length - 1) * 1000) / 2 - 50);
    await waitFor("the webhook disabled again", async () => (await call("GET", `/webhooks/${wh.id}`)).body.data.status === "disabled");
    await waitFor(
      "no delivery left pending",
      async () => (await total(`/webhooks/${wh.id}/deliveries?status=pending&per_page=1`)) === 0,
      30_000,
    );

    const sent = rx.byPath(path).length - before;
    // Attempts start 1/MANUAL_PER_SECOND apart and the receiver answers at once: the tenth failure
    // is counted before the next starts (one more only on a machine too slow to record it in that time).
    console.log(`30 redeliveries at once after a re-enable: ${sent} requests to the receiver (bound ${DISABLE_AFTER_FAILURES} + 1)`);
    expect(sent).toBeGreaterThanOrEqual(DISABLE_AFTER_FAILURES);
    expect(sent).toBeLessThanOrEqual(DISABLE_AFTER_FAILURES + 1);
  }, 120_000);
});
