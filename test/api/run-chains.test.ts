import { waitFor } from "../../tools/procs";
import { api, expectError, startPlatform, usePlatform, type Platform } from "../helpers/platform";

/**
 * Every way a run starts counts against the run budgets, and workflows that start each other stop
 * at their chain's budget however they do it: through an emit step, or through an http step that
 * posts an event to the platform's own API (the engine's requests carry the chain, see
 * shared/records/chain.ts).
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RATE_LIMIT_MAX: "100000" });
const call = (method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>) =>
  api(suite.p.baseUrl, method, path, { key, body, headers });

describe("an http step's request", () => {
  it("may not set Host (nor the chain the engine sets): 400 naming the field when the workflow is written", async () => {
    const { live } = await suite.p.createOrg("Hosts");
    for (const name of ["Host", "host", "Service-Chain"]) {
      const step = { id: "call", type: "http", url: "https://example.com/", headers: { [name]: "internal.example" } };
      const res = await call("POST", "/workflows", live, { name: "h", trigger: { type: "manual" }, steps: [step] });
      expectError(res, 400, "parameter_invalid", `steps[0].headers.${name}`);
    }
  });

  it("that posts an event to the platform carries the run's chain: a loop through the API stops at the chain's depth, saying so", async () => {
    const { live } = await suite.p.createOrg("Loops");
    const post = {
      id: "again",
      type: "http",
      method: "POST",
      url: `${suite.p.baseUrl}/events`,
      headers: { authorization: `Bearer ${live}` },
      body: { type: "loop.ping", data: { from: "{{run.id}}" } },
    };
    const wf = (
      await call("POST", "/workflows", live, { name: "loop", trigger: { type: "event", event_type: "loop.ping" }, steps: [post] })
    ).body.data;
    const root = (await call("POST", "/events", live, { type: "loop.ping", data: {} })).body.data;
    await waitFor(
      "the chain to be stopped",
      async () => (await call("GET", "/events?type=workflow.chain_limited", live)).body.meta.total > 0,
    );
    const runs = (await call("GET", `/workflows/${wf.id}/runs?per_page=100`, live)).body;
    await waitFor("every run of the chain ended", async () =>
      (await call("GET", `/workflows/${wf.id}/runs?per_page=100`, live)).body.data.every((r: any) => r.status === "succeeded"),
    );
    expect(runs.meta.total).toBe(10);
    const pings = (await call("GET", "/events?type=loop.ping&per_page=100", live)).body;
    expect(pings.meta.total).toBe(11);
    const limited = (await call("GET", "/events?type=workflow.chain_limited", live)).body;
    expect(limited.meta.total).toBe(1);
    expect(limited.data[0].data).toEqual({
      root_event_id: root.id,
      event_id: pings.data[0].id,
      workflow_id: wf.id,
      reason: "depth",
      limit: 10,
    });
  }, 30_000);

  it("a client's own Service-Chain only ties its event to a chain of its own environment", async () => {
    const a = await suite.p.createOrg("Chained A");
    const b = await suite.p.createOrg("Chained B");
    const listen = { name: "l", trigger: { type: "event", event_type: "deep.ping" }, steps: [{ type: "delay", duration_ms: 1 }] };
    const wf = (await call("POST", "/workflows", b.live, listen)).body.data;
    // A's root event, named as B's chain at its last link: B's event starts nothing, and B's chain
    // (not A's) is the one recorded as stopped.
    const rootOfA = (await call("POST", "/events", a.live, { type: "deep.ping", data: {} })).body.data;
    await call("POST", "/events", b.live, { type: "deep.ping", data: {} }, { "service-chain": `${rootOfA.id}:10` });
    // B's next event, unchained, starts its run: the trigger went through the one before it.
    await call("POST", "/events", b.live, { type: "deep.ping", data: {} });
    await waitFor("B's unchained event's run", async () => (await call("GET", `/workflows/${wf.id}/runs`, b.live)).body.meta.total === 1);
    expect((await call("GET", "/events?type=workflow.chain_limited", a.live)).body.meta.total).toBe(0);
  });
});

describe("RUN_STARTS_PER_MINUTE", () => {
  let p: Platform;
  beforeAll(async () => {
    p = await startPlatform({ RUN_STARTS_PER_MINUTE: "5", RATE_LIMIT_MAX: "100000" });
  });
  afterAll(() => p?.stop());

  it("counts event-started runs: an event that starts 5 spends the minute's budget of the API too; the 6th starts the next minute", async () => {
    const { live } = await p.createOrg("Starts");
    const c = (method: string, path: string, body?: unknown) => api(p.baseUrl, method, path, { key: live, body });
    const listen = { trigger: { type: "event", event_type: "many.start" }, steps: [{ type: "delay", duration_ms: 1 }] };
    const ids: string[] = [];
    for (let i = 0; i < 6; i += 1) ids.push((await c("POST", "/workflows", { name: `w${i}`, ...listen })).body.data.id);
    const manual = (await c("POST", "/workflows", { name: "m", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] }))
      .body.data;
    const started = async () => {
      let n = 0;
      for (const id of ids) n += (await c("GET", `/workflows/${id}/runs`)).body.meta.total;
      return n;
    };
    // The minute's budget is the subject: begin with most of a minute left, so all that follows falls in it.
    await waitFor("a minute with 40 s left", () => Date.now() % 60_000 < 20_000, 61_000);
    const minute = Math.floor(Date.now() / 60_000);
    await c("POST", "/events", { type: "many.start", data: {} });
    await waitFor("5 event-started runs", async () => (await started()) === 5);
    expectError(await c("POST", `/workflows/${manual.id}/runs`, {}), 429, "rate_limited");
    expect(Math.floor(Date.now() / 60_000)).toBe(minute);
    expect(await started()).toBe(5);
    // The sixth waits (its event stays marked) and starts once a new minute's budget opens.
    await waitFor("the sixth run, in the next minute", async () => (await started()) === 6, 75_000);
    expect(Math.floor(Date.now() / 60_000)).toBeGreaterThan(minute);
  }, 180_000);
});
