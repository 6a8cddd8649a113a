import { waitFor } from "../../tools/procs";
import { startHoldTarget, type HoldTarget } from "../helpers/hold-target";
import { expectError, usePlatform } from "../helpers/platform";
import { runsApi } from "../helpers/steps";

/** Flow control per key (docs/workflows/README.md#flow-control), through the API. */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000", RUN_STARTS_PER_MINUTE: "100000", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
// The test environment: its http steps may call http:// targets.
const { call, start, ended } = runsApi(
  () => suite.p.baseUrl,
  () => suite.acme.test,
);

let target: HoldTarget;
beforeAll(async () => {
  target = await startHoldTarget();
});
afterAll(() => target.close());

async function flowWorkflow(flow: Record<string, unknown>): Promise<string> {
  const res = await call("POST", "/workflows", {
    name: "per customer",
    trigger: { type: "manual" },
    steps: [{ id: "call", type: "http", method: "POST", url: `${target.url}/{{ input.customer }}` }],
    ...flow,
  });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

const getRun = async (wf: string, id: string) => (await call("GET", `/workflows/${wf}/runs/${id}`)).body.data;

describe("concurrency per key", () => {
  it("never runs two of one key at once, holds the others queued, and does not hold another key back", async () => {
    const wf = await flowWorkflow({ concurrency: { limit: 1, key: "{{ input.customer }}" } });
    const ids: { key: string; id: string }[] = [];
    for (let i = 0; i < 4; i += 1) for (const customer of ["a", "b"]) ids.push({ key: customer, id: await start(wf, { customer, i }) });
    // One run of each key reaches the target; the others wait, saying why.
    await waitFor("one run of each key in flight", () => target.open.get("a") === 1 && target.open.get("b") === 1);
    const waiting = await Promise.all(ids.slice(2).map(({ id }) => getRun(wf, id)));
    for (const run of waiting) {
      expect(run.status).toBe("queued");
      expect(run.queued_reason).toBe("concurrency");
      expect(["a", "b"]).toContain(run.flow_key);
    }
    // Let each request go as it comes until every run ended.
    await waitFor("every run to end", async () => {
      target.release();
      const runs = await Promise.all(ids.map(({ id }) => getRun(wf, id)));
      return runs.every((r) => r.status === "succeeded");
    });
    expect(target.most.get("a")).toBe(1);
    expect(target.most.get("b")).toBe(1);
    // The two keys ran side by side.
    expect(target.mostOverall).toBe(2);
    // Oldest first within a key.
    const started = await Promise.all(ids.map(async ({ key, id }) => ({ key, at: (await getRun(wf, id)).steps[0].started_at })));
    for (const key of ["a", "b"]) {
      const times = started.filter((s) => s.key === key).map((s) => s.at);
      expect([...times].sort()).toEqual(times);
    }
    const done = await ended(wf, ids[0].id);
    expect(done.queued_reason).toBeNull();
  });

  it("cancelling a queued run lets the next one go in its place", async () => {
    const wf = await flowWorkflow({ concurrency: { limit: 1 } });
    const first = await start(wf, { customer: "c" });
    const second = await start(wf, { customer: "c" });
    const third = await start(wf, { customer: "c" });
    await waitFor("the first in flight", () => target.open.get("c") === 1);
    expect((await call("POST", `/workflows/${wf}/runs/${second}/cancel`)).status).toBe(200);
    await waitFor("every run to end", async () => {
      target.release();
      return (await getRun(wf, third)).status === "succeeded";
    });
    expect((await getRun(wf, first)).status).toBe("succeeded");
    expect((await getRun(wf, second)).status).toBe("cancelled");
    expect(target.most.get("c")).toBe(1);
  });

  it("a retried run goes back to the end of its key's line", async () => {
    const wf = await flowWorkflow({ concurrency: { limit: 1 } });
    target.mostOverall = 0;
    const failed = await start(wf, { customer: "f" });
    await waitFor("the first in flight", () => target.open.get("f") === 1);
    target.release(500);
    expect((await ended(wf, failed)).status).toBe("failed");
    const busy = await start(wf, { customer: "g" });
    await waitFor("the second in flight", () => target.open.get("g") === 1);
    const retried = await call("POST", `/workflows/${wf}/runs/${failed}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ status: "queued", queued_reason: "concurrency", attempt: 2 });
    await waitFor("both to end", async () => {
      target.release();
      return (await getRun(wf, failed)).status === "succeeded" && (await getRun(wf, busy)).status === "succeeded";
    });
    expect(target.mostOverall).toBe(1);
  });

  it("refuses a bad concurrency or throttle naming the field", async () => {
    const base = { name: "x", trigger: { type: "manual" }, steps: [{ id: "s", type: "set", output: 1 }] };
    const cases: [unknown, string][] = [
      [{ concurrency: { limit: 0 } }, "concurrency.limit"],
      [{ concurrency: { limit: 1001 } }, "concurrency.limit"],
      [{ concurrency: { limit: 1, key: 5 } }, "concurrency.key"],
      [{ concurrency: { limit: 1, key: "{{ steps.s.output }}" } }, "concurrency.key"],
      [{ concurrency: { limit: 1, key: "{{ input. }}" } }, "concurrency.key"],
      [{ concurrency: { limit: 1, extra: 1 } }, "concurrency.extra"],
      [{ concurrency: "one" }, "concurrency"],
      [{ throttle: { limit: 1 } }, "throttle.period_ms"],
      [{ throttle: { limit: 1, period_ms: 10 } }, "throttle.period_ms"],
      [{ throttle: { limit: 1, period_ms: 1000, key: "{{ steps.x.output }}" } }, "throttle.key"],
      [{ debounce: { period_ms: 1000, max_wait_ms: 50 } }, "debounce.max_wait_ms"],
    ];
    for (const [flow, param] of cases) {
      const res = await call("POST", "/workflows", { ...base, ...(flow as object) });
      expectError(res, 400, "parameter_invalid");
      expect(res.body.error.param).toBe(param);
    }
    const ok = await call("POST", "/workflows", { ...base, concurrency: { limit: 2, key: "{{ input.a }}" } });
    expect(ok.status).toBe(201);
    expect(ok.body.data.concurrency).toEqual({ limit: 2, key: "{{ input.a }}" });
    const patched = await call("PATCH", `/workflows/${ok.body.data.id}`, { concurrency: null, throttle: { limit: 5, period_ms: 1000 } });
    expect(patched.status).toBe(200);
    expect(patched.body.data.concurrency).toBeUndefined();
    expect(patched.body.data.throttle).toEqual({ limit: 5, period_ms: 1000 });
  });
});

describe("throttle per key", () => {
  it("starts at most limit runs of a key per period, the rest queued and started as windows open", async () => {
    // Real time passing is the subject: windows of 1 s.
    const res = await call("POST", "/workflows", {
      name: "throttled",
      trigger: { type: "manual" },
      steps: [{ id: "s", type: "set", output: "{{ input.i }}" }],
      throttle: { limit: 2, period_ms: 1000, key: "{{ input.customer }}" },
    });
    const wf = res.body.data.id;
    const ids = [];
    for (let i = 0; i < 5; i += 1) ids.push(await start(wf, { customer: "t", i }));
    const other = await start(wf, { customer: "u", i: 0 });
    const runs = await Promise.all(ids.map((id) => ended(wf, id)));
    expect((await ended(wf, other)).status).toBe("succeeded");
    const windows = runs.map((r) => Math.floor(Date.parse(r.steps[0].started_at) / 1000));
    const perWindow = new Map<number, number>();
    for (const w of windows) perWindow.set(w, (perWindow.get(w) ?? 0) + 1);
    expect(Math.max(...perWindow.values())).toBeLessThanOrEqual(2);
    expect(perWindow.size).toBeGreaterThanOrEqual(3);
    // Oldest first.
    expect([...windows].sort()).toEqual(windows);
  });
});

describe("debounce per key", () => {
  it("collapses a burst of starts of one key into one run with the last input; another key runs on its own", async () => {
    // Real time passing is the subject: a burst's period of 1 s.
    const res = await call("POST", "/workflows", {
      name: "debounced",
      trigger: { type: "manual" },
      steps: [{ id: "s", type: "set", output: "{{ input.i }}" }],
      debounce: { period_ms: 1000, max_wait_ms: 5000, key: "{{ input.customer }}" },
    });
    expect(res.status).toBe(201);
    const wf = res.body.data.id;
    const burst = [];
    for (let i = 0; i < 4; i += 1) burst.push(await start(wf, { customer: "d", i }));
    const other = await start(wf, { customer: "e", i: 9 });
    // Every start of the burst answers the one pending run.
    expect(new Set(burst).size).toBe(1);
    expect(other).not.toBe(burst[0]);
    const pending = await getRun(wf, burst[0]);
    expect(pending).toMatchObject({ status: "queued", queued_reason: "debounce", input: { customer: "d", i: 3 } });
    const done = await ended(wf, burst[0]);
    expect(done.status).toBe("succeeded");
    expect(done.output).toBe(3);
    expect((await ended(wf, other)).output).toBe(9);
    const all = (await call("GET", `/workflows/${wf}/runs`)).body.data;
    expect(all).toHaveLength(2);
    // A start after the burst ended begins a new run.
    const later = await start(wf, { customer: "d", i: 4 });
    expect(later).not.toBe(burst[0]);
    expect((await ended(wf, later)).output).toBe(4);
  });

  it("starts the run at most max_wait_ms after the burst's first start, however long it goes on", async () => {
    const res = await call("POST", "/workflows", {
      name: "debounced with a deadline",
      trigger: { type: "manual" },
      steps: [{ id: "s", type: "set", output: "{{ input.i }}" }],
      debounce: { period_ms: 800, max_wait_ms: 1500 },
    });
    const wf = res.body.data.id;
    const first = await start(wf, { i: 0 });
    const firstAt = Date.now();
    // Starts every 200 ms (real time is the subject) until the run has started.
    let i = 1;
    let run = await getRun(wf, first);
    while (run.status === "queued" && run.queued_reason === "debounce" && Date.now() - firstAt < 5000) {
      await new Promise((r) => setTimeout(r, 200));
      await call("POST", `/workflows/${wf}/runs`, { input: { i: i++ } });
      run = await getRun(wf, first);
    }
    const done = await ended(wf, first);
    expect(done.status).toBe("succeeded");
    expect(Date.parse(done.steps[0].started_at) - firstAt).toBeLessThan(1500 + 1500);
    expect(Date.parse(done.steps[0].started_at) - firstAt).toBeGreaterThanOrEqual(1400);
  });

  it("a debounced run under concurrency, once its burst ends, waits its turn in its key's line", async () => {
    const res = await call("POST", "/workflows", {
      name: "debounced, one at a time",
      trigger: { type: "manual" },
      concurrency: { limit: 1 },
      debounce: { period_ms: 300, key: "{{ input.customer }}" },
      steps: [{ id: "call", type: "http", method: "POST", url: `${target.url}/{{ input.customer }}/{{ run.id }}` }],
    });
    expect(res.status).toBe(201);
    const wf = res.body.data.id;
    target.mostOverall = 0;
    const first = await start(wf, { customer: "p" });
    await waitFor("the first in flight", () => target.open.get("p") === 1);
    // A burst of another key stays pending, then waits behind the running one.
    const second = await start(wf, { customer: "q" });
    expect((await getRun(wf, second)).queued_reason).toBe("debounce");
    await waitFor("the second to wait its turn", async () => (await getRun(wf, second)).queued_reason === "concurrency");
    await waitFor("both to end", async () => {
      target.release();
      return (await getRun(wf, first)).status === "succeeded" && (await getRun(wf, second)).status === "succeeded";
    });
    expect(target.mostOverall).toBe(1);
  });
});
