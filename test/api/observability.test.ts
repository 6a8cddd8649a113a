import { hostname, userInfo } from "node:os";
import { request } from "undici";
import { freePort, waitFor } from "../../tools/procs";
import { api, startPlatform, type Platform, type TestOrg } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * Endpoint health, domain metrics, warn lines, request ids and traceparent, through the gateway to
 * real receivers. The platform logs at warn; its lines (JSON, one per call) are taken from console.warn.
 */
jest.setTimeout(60_000);

const lines: Record<string, unknown>[] = [];
let warnSpy: jest.SpyInstance;
let p: Platform;
let acme: TestOrg;
let rx: Receiver;
let metricsPort: number;

beforeAll(async () => {
  warnSpy = jest.spyOn(console, "warn").mockImplementation((...args: unknown[]) => {
    for (const a of args) {
      try {
        lines.push(JSON.parse(String(a)) as Record<string, unknown>);
      } catch {
        // not a JSON line
      }
    }
  });
  metricsPort = await freePort();
  rx = await startReceiver();
  p = await startPlatform({
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: "warn",
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    WEBHOOK_TIMEOUT_MS: "400",
    WEBHOOK_RETRY_DELAYS_MS: "50,50,50,50",
    WORKFLOW_RETRY_BASE_MS: "20",
  });
  acme = await p.createOrg("Acme");
});
afterAll(async () => {
  await p.stop();
  await rx.close();
  warnSpy.mockRestore();
});

const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  api(p.baseUrl, method, path, { key: acme.live, body, headers });

async function scrape(): Promise<string> {
  const res = await request(`http://127.0.0.1:${metricsPort}/metrics`);
  expect(res.statusCode).toBe(200);
  return res.body.text();
}
/** The value of the sample `name{…}` whose labels include all of `labels`; undefined without one. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.split(" ").pop());
  }
  return undefined;
}
async function webhook(path: string, events = ["*"]) {
  const res = await call("POST", "/webhooks", { url: rx.url(path), events });
  expect(res.status).toBe(201);
  rx.setSecret(path, res.body.data.secret);
  return res.body.data as { id: string };
}

describe("request ids and traceparent", () => {
  it("honours a well-formed X-Request-Id and echoes it as Request-Id; refuses others for a new one", async () => {
    const ok = await call("GET", "/webhooks", undefined, { "x-request-id": "client-42.a_b" });
    expect(ok.headers["request-id"]).toBe("client-42.a_b");
    for (const bad of ["has space", "x".repeat(129), "semi;colon"]) {
      const res = await call("GET", "/webhooks", undefined, { "x-request-id": bad });
      expect(res.headers["request-id"]).toMatch(/^req_/);
    }
    const failed = await call("GET", "/webhooks/wh_nope", undefined, { "x-request-id": "mine-1" });
    expect(failed.body.error.request_id).toBe("mine-1");
  });

  it("passes a valid traceparent on to the delivery as a child span; an invalid one is ignored", async () => {
    await webhook("/trace", ["trace.test"]);
    const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    await call("POST", "/events", { type: "trace.test", data: { n: 1 } }, { traceparent: parent });
    await call(
      "POST",
      "/events",
      { type: "trace.test", data: { n: 2 } },
      { traceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01" },
    );
    await rx.waitFor(() => rx.byPath("/trace").length === 2);
    const [first, second] = [1, 2].map((n) => rx.byPath("/trace").find((r) => r.json.data.n === n)!);
    expect(first.verified).toBe(true);
    const m = /^00-4bf92f3577b34da6a3ce929d0e0e4736-([0-9a-f]{16})-01$/.exec(first.headers.traceparent);
    expect(m).not.toBeNull();
    expect(m![1]).not.toBe("00f067aa0ba902b7");
    expect(second.headers.traceparent).toBeUndefined();
  });
});

describe("metrics", () => {
  it("counts requests by route template and the status the client got (a validation error as 400), with latency", async () => {
    const bad = await call("POST", "/webhooks", { url: 42 });
    expect(bad.status).toBe(400);
    await call("GET", "/webhooks/wh_00000000000000000000000000");
    const text = await scrape();
    expect(sample(text, "wfp_http_requests_total", { route: "/webhooks", method: "POST", status: "400" })).toBeGreaterThanOrEqual(1);
    expect(sample(text, "wfp_http_requests_total", { status: "422" })).toBeUndefined();
    expect(sample(text, "wfp_http_requests_total", { route: "/webhooks/{id}", method: "GET", status: "404" })).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain("wh_00000000000000000000000000");
    expect(
      sample(text, "wfp_http_request_duration_seconds_bucket", { route: "/webhooks", method: "POST", le: "+Inf" }),
    ).toBeGreaterThanOrEqual(1);
  });

  it("counts deliveries and attempts by outcome, and shows a backlog and its age while a receiver hangs", async () => {
    const before = await scrape();
    const base = (name: string, outcome: string) => sample(before, name, { outcome }) ?? 0;
    const [okD, badD, okA, badA] = [
      base("wfp_webhook_deliveries_total", "succeeded"),
      base("wfp_webhook_deliveries_total", "failed"),
      base("wfp_webhook_attempts_total", "succeeded"),
      base("wfp_webhook_attempts_total", "failed"),
    ];
    await webhook("/m-ok", ["m.ok"]);
    await webhook("/m-bad", ["m.bad"]);
    rx.behave("/m-bad", () => ({ status: 500 }));
    await call("POST", "/events", { type: "m.ok", data: {} });
    await call("POST", "/events", { type: "m.ok", data: {} });
    await call("POST", "/events", { type: "m.bad", data: {} });
    await waitFor("the deliveries to settle in the metrics", async () => {
      const t = await scrape();
      return (
        (sample(t, "wfp_webhook_deliveries_total", { outcome: "succeeded" }) ?? 0) - okD >= 2 &&
        (sample(t, "wfp_webhook_deliveries_total", { outcome: "failed" }) ?? 0) - badD >= 1
      );
    });
    const t = await scrape();
    expect((sample(t, "wfp_webhook_deliveries_total", { outcome: "succeeded" }) ?? 0) - okD).toBe(2);
    expect((sample(t, "wfp_webhook_deliveries_total", { outcome: "failed" }) ?? 0) - badD).toBe(1);
    expect((sample(t, "wfp_webhook_attempts_total", { outcome: "succeeded" }) ?? 0) - okA).toBe(2);
    expect((sample(t, "wfp_webhook_attempts_total", { outcome: "failed" }) ?? 0) - badA).toBe(5);

    await webhook("/m-hang", ["m.hang"]);
    rx.behave("/m-hang", () => ({ hang: true }));
    // Each delivery to the hanging receiver stays pending through its five attempts (about 2 s with
    // this suite's time-outs and retry delays), and the gauge is measured every 2 s: one more event
    // at each try keeps a delivery over a second old pending whenever it is measured.
    let i = 0;
    await waitFor("a pending delivery over a second old", async () => {
      await call("POST", "/events", { type: "m.hang", data: { i: i++ } });
      return (sample(await scrape(), "wfp_webhook_oldest_pending_age_seconds") ?? 0) >= 1;
    });
    rx.behave("/m-hang", () => ({ status: 200 }));
    await waitFor("the backlog to drain", async () => (sample(await scrape(), "wfp_webhook_oldest_pending_age_seconds") ?? 1) === 0);
  });

  it("shows runs waiting for an approval, and runs by end status", async () => {
    const wf = await call("POST", "/workflows", {
      name: "approve me",
      trigger: { type: "manual" },
      steps: [{ id: "ok", type: "approval", message: "go?" }],
    });
    const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, {});
    expect(run.status).toBe(201);
    await waitFor("the run counted as awaiting approval", async () => (sample(await scrape(), "wfp_runs_awaiting_approval") ?? 0) >= 1);
    expect(sample(await scrape(), "wfp_runs", { status: "waiting" })).toBeGreaterThanOrEqual(1);
    expect((await call("POST", `/workflows/${wf.body.data.id}/runs/${run.body.data.id}/reject`, {})).status).toBe(200);
    await waitFor("no run awaiting approval", async () => sample(await scrape(), "wfp_runs_awaiting_approval") === 0);
    await waitFor(
      "the failed run counted",
      async () => (sample(await scrape(), "wfp_runs_finished_total", { status: "failed" }) ?? 0) >= 1,
    );
  });

  it("counts a parent waiting for its child run as waiting, not as awaiting approval", async () => {
    const leaf = await call("POST", "/workflows", { name: "ask", trigger: { type: "manual" }, steps: [{ id: "ok", type: "approval" }] });
    const wf = await call("POST", "/workflows", {
      name: "parent",
      trigger: { type: "manual" },
      steps: [{ id: "call", type: "run_workflow", workflow_id: leaf.body.data.id }],
    });
    const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, {});
    // One measurement holds both gauges: the parent and its child waiting, the child's approval alone awaited.
    await waitFor("both runs counted as waiting", async () => (sample(await scrape(), "wfp_runs", { status: "waiting" }) ?? 0) >= 2);
    expect(sample(await scrape(), "wfp_runs_awaiting_approval")).toBe(1);
    expect((await call("POST", `/workflows/${wf.body.data.id}/runs/${run.body.data.id}/cancel`, {})).status).toBe(200);
    await waitFor("no run waiting", async () => sample(await scrape(), "wfp_runs", { status: "waiting" }) === 0);
  });

  it("labels nothing with the machine's host name or user", async () => {
    const text = await scrape();
    expect(text).not.toContain(hostname());
    expect(text).not.toContain(`"${userInfo().username}"`);
    expect(text).not.toMatch(/nodeID="/);
  });
});

describe("endpoint health", () => {
  it("a failing endpoint whose deliveries are all pending shows 0 %, its streak and last attempt; analytics agree", async () => {
    // Retries every 50 ms: 5 attempts per delivery, each failing.
    const hook = await webhook("/sick", ["h.sick"]);
    const good = await webhook("/well", ["h.well"]);
    rx.behave("/sick", () => ({ status: 503 }));
    for (let i = 0; i < 2; i++) await call("POST", "/events", { type: "h.sick", data: { i } });
    await call("POST", "/events", { type: "h.well", data: {} });
    await rx.waitFor(() => rx.byPath("/sick").length >= 4 && rx.byPath("/well").length === 1);
    await waitFor("health to show the failures", async () => {
      const h = (await call("GET", `/webhooks/${hook.id}`)).body.data.health;
      return h.attempts_24h.failed >= 4;
    });
    const one = (await call("GET", `/webhooks/${hook.id}`)).body.data;
    expect(one.health.success_rate_24h).toBe(0);
    expect(one.health.consecutive_failed_attempts).toBeGreaterThanOrEqual(4);
    expect(one.health.last_attempt).toMatchObject({ status_code: 503, ok: false });
    const list = (await call("GET", "/webhooks?per_page=100")).body.data as any[];
    expect(list.find((w) => w.id === good.id).health).toMatchObject({
      success_rate_24h: 1,
      consecutive_failed_attempts: 0,
      last_attempt: { status_code: 200, ok: true },
    });
    expect(list.find((w) => w.id === hook.id).health.success_rate_24h).toBe(0);
    const a = (await call("GET", "/analytics/webhooks")).body.data;
    const mine = a.webhooks.find((w: any) => w.webhook_id === hook.id);
    expect(mine.success_rate).toBe(0);
    expect(mine.attempt_counts.failed).toBeGreaterThanOrEqual(4);
  });
});

describe("warn lines", () => {
  it("for a failed attempt, with the delivery, webhook, event and request ids", async () => {
    const hook = await webhook("/warn", ["w.fail"]);
    rx.behave("/warn", () => ({ status: 500 }));
    const ev = await call("POST", "/events", { type: "w.fail", data: {} }, { "x-request-id": "req-warn-1" });
    await waitFor("the warn line", () => lines.some((l) => l.msg === "delivery attempt failed" && l.event_id === ev.body.data.id));
    const line = lines.find((l) => l.msg === "delivery attempt failed" && l.event_id === ev.body.data.id)!;
    expect(line).toMatchObject({ level: "warn", webhook_id: hook.id, status_code: 500, attempt: 1, request_id: "req-warn-1" });
    expect(line.delivery_id).toMatch(/^del_/);
    expect(typeof line.next_attempt_at).toBe("string");
  });

  it("for an auto-disable, with the webhook id and its failures", async () => {
    const hook = await webhook("/dead", ["d.fail"]);
    rx.behave("/dead", () => ({ status: 500 }));
    for (let i = 0; i < 10; i++) await call("POST", "/events", { type: "d.fail", data: { i } });
    await waitFor("the disable line", () => lines.some((l) => l.msg === "webhook disabled" && l.webhook_id === hook.id), 30_000);
    expect(lines.find((l) => l.msg === "webhook disabled" && l.webhook_id === hook.id)).toMatchObject({ level: "warn", failures: 10 });
  });

  it("for a failed run, with its run, workflow, step, error and request ids; its http step carries the traceparent", async () => {
    rx.behave("/step", () => ({ status: 500 }));
    const wf = await call("POST", "/workflows", {
      name: "fails",
      trigger: { type: "manual" },
      steps: [{ id: "call", type: "http", method: "POST", url: rx.url("/step"), retries: 0 }],
    });
    expect(wf.status).toBe(201);
    const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, {}, { "x-request-id": "req-run-1", traceparent: parent });
    await waitFor("the run failed line", () => lines.some((l) => l.msg === "run failed" && l.run_id === run.body.data.id));
    expect(lines.find((l) => l.msg === "run failed" && l.run_id === run.body.data.id)).toMatchObject({
      level: "warn",
      workflow_id: wf.body.data.id,
      step: "call",
      request_id: "req-run-1",
    });
    expect(rx.byPath("/step")[0].headers.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-(?!b7ad6b7169203331)[0-9a-f]{16}-01$/);
  });
});
