import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";
import { runsApi, useStepTarget } from "../helpers/steps";

/** wait_for_event and cancel_on through the API (docs/workflows/README.md). */
const suite = usePlatform({
  RATE_LIMIT_MAX: "100000",
  RUN_STARTS_PER_MINUTE: "100000",
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WORKFLOW_RETRY_BASE_MS: "200",
});
const steps = useStepTarget();
const acme = runsApi(
  () => suite.p.baseUrl,
  () => suite.acme.live,
);
const globex = runsApi(
  () => suite.p.baseUrl,
  () => suite.globex.live,
);
type Api = typeof acme;

const emit = async (org: Api, type: string, data: Record<string, unknown>): Promise<string> => {
  const res = await org.call("POST", "/events", { type, data });
  expect(res.status).toBe(201);
  return res.body.data.id;
};
const getRun = async (org: Api, wf: string, run: string) => (await org.call("GET", `/workflows/${wf}/runs/${run}`)).body.data;
async function runIn(org: Api, wf: string, run: string, status: string): Promise<any> {
  let found: any;
  await waitFor(`run ${run} to be ${status}`, async () => {
    found = await getRun(org, wf, run);
    return found.status === status;
  });
  return found;
}
/** A wait for payment.succeeded of `input.order_id`, then a step that reads the event. */
const payWorkflow = (org: Api, extra: Record<string, unknown> = {}) =>
  org.workflow([
    { id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: { "data.order_id": "{{ input.order_id }}" }, ...extra },
    { id: "after", type: "set", output: "{{ steps.pay.output.data.amount }}" },
  ]);

describe("wait_for_event", () => {
  it("resumes on its event only: not one stored before it began, of another key, of another tenant, or its filter refuses", async () => {
    const filtered = await payWorkflow(acme, { filter: "event.data.amount > 0" });
    const plain = await payWorkflow(acme);
    // Stored before either run waits: it counts for neither.
    await emit(acme, "payment.succeeded", { order_id: "o1", amount: 9 });
    const a = await acme.start(filtered.id, { order_id: "o1" });
    const w = await acme.start(plain.id, { order_id: "o1" });
    const x2 = await acme.start(plain.id, { order_id: "o2" });
    const waiting = await runIn(acme, filtered.id, a, "waiting");
    expect(waiting.steps[0]).toMatchObject({
      status: "waiting",
      waiting_for: { event_type: "payment.succeeded", match: { "data.order_id": "o1" } },
      timeout_at: expect.any(String),
    });
    await runIn(acme, plain.id, w, "waiting");
    await runIn(acme, plain.id, x2, "waiting");
    const theirs = await payWorkflow(globex);
    const g = await globex.start(theirs.id, { order_id: "o1" });
    await runIn(globex, theirs.id, g, "waiting");

    // Globex's event resumes Globex's run (the witness that it was handled), none of Acme's.
    const gEvent = await emit(globex, "payment.succeeded", { order_id: "o1", amount: 3 });
    expect((await runIn(globex, theirs.id, g, "succeeded")).steps[0].output.id).toBe(gEvent);
    // Another key resumes its own run only.
    await emit(acme, "payment.succeeded", { order_id: "o2", amount: 2 });
    expect((await runIn(acme, plain.id, x2, "succeeded")).steps[1].output).toBe(2);
    // amount 0: the plain wait takes it, the filtered one does not.
    const zero = await emit(acme, "payment.succeeded", { order_id: "o1", amount: 0 });
    const plainDone = await runIn(acme, plain.id, w, "succeeded");
    expect(plainDone.steps[0].output).toMatchObject({ id: zero, type: "payment.succeeded", data: { order_id: "o1", amount: 0 } });
    expect((await getRun(acme, filtered.id, a)).status).toBe("waiting");

    const paid = await emit(acme, "payment.succeeded", { order_id: "o1", amount: 7 });
    const done = await runIn(acme, filtered.id, a, "succeeded");
    expect(done.steps[0]).toMatchObject({ status: "succeeded", output: { id: paid, data: { amount: 7 } } });
    expect(done.steps[1].output).toBe(7);
    // Once resumed, a later event changes nothing.
    await emit(acme, "payment.succeeded", { order_id: "o1", amount: 8 });
    const again = await acme.start(plain.id, { order_id: "o1" });
    await runIn(acme, plain.id, again, "waiting");
    const later = await emit(acme, "payment.succeeded", { order_id: "o1", amount: 1 });
    expect((await runIn(acme, plain.id, again, "succeeded")).steps[0].output.id).toBe(later);
    expect((await getRun(acme, filtered.id, a)).steps[0].output.id).toBe(paid);
  });

  it("events for one wait sent at once resume it once: its next step runs once", async () => {
    steps.target.answer = () => ({ status: 200, json: {} });
    const wf = await acme.workflow([
      { id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: { "data.order_id": "{{ input.order_id }}" } },
      { id: "ship", type: "http", url: `${steps.target.url}/ship/{{ input.order_id }}` },
    ]);
    const run = await acme.start(wf.id, { order_id: "burst" });
    await runIn(acme, wf.id, run, "waiting");
    const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => emit(acme, "payment.succeeded", { order_id: "burst", i })));
    const done = await acme.ended(wf.id, run);
    expect(done.status).toBe("succeeded");
    expect(ids).toContain(done.steps[0].output.id);
    expect(done.steps[1]).toMatchObject({ status: "succeeded", attempt_count: 1 });
    expect(steps.target.got.filter((r) => r.path === "/ship/burst")).toHaveLength(1);
  });

  it("fails with timed_out when no event comes within timeout_ms; on_error: continue goes on", async () => {
    const wf = await payWorkflow(acme, { timeout_ms: 200 });
    const run = await acme.ended(wf.id, await acme.start(wf.id, { order_id: "never" }));
    expect(run.status).toBe("failed");
    expect(run.steps[0]).toMatchObject({
      status: "failed",
      error_code: "timed_out",
      error: "no payment.succeeded event matched within the step's timeout_ms (200 ms)",
    });
    expect(run.steps[1].status).toBe("skipped");

    const tolerant = await acme.workflow([
      { id: "pay", type: "wait_for_event", event_type: "payment.succeeded", match: {}, timeout_ms: 100, on_error: "continue" },
      { id: "after", type: "set", output: "{{ steps.pay.error.code }}" },
    ]);
    const goesOn = await acme.ended(tolerant.id, await acme.start(tolerant.id));
    expect(goesOn.status).toBe("succeeded");
    expect(goesOn.steps[1].output).toBe("timed_out");
  });
  it("a wait that would add a 21st set of match paths on one event type fails with limit_exceeded, naming the limit", async () => {
    const runs = [];
    for (let i = 0; i <= 20; i += 1) {
      const wf = await acme.workflow([
        { id: "w", type: "wait_for_event", event_type: "shape.limit", match: { [`data.k${i}`]: "{{ input.v }}" }, timeout_ms: 60_000 },
      ]);
      const run = await acme.start(wf.id, { v: "x" });
      runs.push({ wf: wf.id, run, status: i < 20 ? "waiting" : "failed" });
      // One at a time: the 21st is the one over the limit.
      await runIn(acme, wf.id, run, runs[i].status);
    }
    const over = await getRun(acme, runs[20].wf, runs[20].run);
    expect(over.steps[0]).toMatchObject({ status: "failed", error_code: "limit_exceeded" });
    expect(over.steps[0].error).toMatch(
      /^20 different sets of match paths wait on shape\.limit in this environment already \(SHAPES_PER_TYPE_MAX\)/,
    );
    // A wait on paths already in use still registers.
    const same = await acme.workflow([{ id: "w", type: "wait_for_event", event_type: "shape.limit", match: { "data.k3": "y" } }]);
    await runIn(acme, same.id, await acme.start(same.id), "waiting");
  });
});

describe("cancel_on", () => {
  it("an event of the workflow's cancel_on cancels the waiting runs it matches, and only those", async () => {
    const res = await acme.call("POST", "/workflows", {
      name: "cancellable",
      trigger: { type: "manual" },
      cancel_on: [{ event_type: "order.cancelled", match: { "data.order_id": "{{ input.order_id }}" } }],
      steps: [{ id: "gate", type: "approval", message: "ship?" }],
    });
    expect(res.status).toBe(201);
    expect(res.body.data.cancel_on).toEqual([{ event_type: "order.cancelled", match: { "data.order_id": "{{ input.order_id }}" } }]);
    const wf = res.body.data.id;
    const one = await acme.start(wf, { order_id: "c1" });
    const two = await acme.start(wf, { order_id: "c2" });
    await runIn(acme, wf, one, "waiting");
    await runIn(acme, wf, two, "waiting");
    const cancelling = await emit(acme, "order.cancelled", { order_id: "c1" });
    const cancelled = await runIn(acme, wf, one, "cancelled");
    expect(cancelled).toMatchObject({ cancel_reason: "cancel_on", cancel_event_id: cancelling, pending_approval: null });
    expect(cancelled.steps[0].status).toBe("cancelled");
    // The same event was handled (it cancelled run one): run two stays.
    expect((await getRun(acme, wf, two)).status).toBe("waiting");
  });

  it("cancels a running run between its http step's attempts: no attempt after it", async () => {
    steps.target.answer = () => ({ status: 503 });
    const res = await acme.call("POST", "/workflows", {
      name: "retrying",
      trigger: { type: "manual" },
      cancel_on: [{ event_type: "order.cancelled", match: { "data.order_id": "{{ input.order_id }}" } }],
      steps: [{ id: "call", type: "http", url: `${steps.target.url}/flaky`, retries: 10 }],
    });
    expect(res.status).toBe(201);
    const run = await acme.start(res.body.data.id, { order_id: "r1" });
    await waitFor("a second attempt", async () => steps.target.got.length >= 2);
    expect((await getRun(acme, res.body.data.id, run)).status).toBe("running");
    await emit(acme, "order.cancelled", { order_id: "r1" });
    const cancelled = await runIn(acme, res.body.data.id, run, "cancelled");
    expect(cancelled).toMatchObject({ cancel_reason: "cancel_on" });
    const attempts = steps.target.got.length;
    // Real time passing is the subject: the back-offs the cancellation cut short (200 ms, doubling) go by.
    await waitFor("two seconds to pass", async () => Date.now() > Date.parse(cancelled.finished_at) + 2_000);
    expect(steps.target.got).toHaveLength(attempts);
    expect((await getRun(acme, res.body.data.id, run)).status).toBe("cancelled");
  });
});

describe("validation", () => {
  const post = (body: Record<string, unknown>) =>
    api(suite.p.baseUrl, "POST", "/workflows", { key: suite.acme.live, body: { name: "bad", trigger: { type: "manual" }, ...body } });
  const wait = (extra: Record<string, unknown>) => ({ steps: [{ id: "w", type: "wait_for_event", event_type: "a.b", ...extra }] });

  it.each([
    [wait({ event_type: "nope" }), "steps[0].event_type"],
    [wait({ event_type: "workflow.nothing" }), "steps[0].event_type"],
    [wait({ match: [] }), "steps[0].match"],
    [wait({ match: { "data.a": { x: 1 } } }), 'steps[0].match["data.a"]'],
    [wait({ match: { amount: 1 } }), "steps[0].match.amount"],
    [wait({ match: { "data.a": "{{ steps.later.output }}" } }), 'steps[0].match["data.a"]'],
    [wait({ match: { "data.a": "x".repeat(257) } }), 'steps[0].match["data.a"]'],
    [wait({ match: Object.fromEntries(["a", "b", "c", "d", "e", "f"].map((k) => [`data.${k}`, 1])) }), "steps[0].match"],
    [wait({ filter: "event.data.x +" }), "steps[0].filter"],
    [wait({ filter: "input.x == 1" }), "steps[0].filter"],
    [wait({ timeout_ms: 0 }), "steps[0].timeout_ms"],
    [wait({ timeout_ms: 31 * 24 * 3_600_000 }), "steps[0].timeout_ms"],
    [{ ...wait({}), cancel_on: {} }, "cancel_on"],
    [{ ...wait({}), cancel_on: Array.from({ length: 6 }, () => ({ event_type: "a.b" })) }, "cancel_on"],
    [{ ...wait({}), cancel_on: [{ event_type: "a" }] }, "cancel_on[0].event_type"],
    [{ ...wait({}), cancel_on: [{ event_type: "a.b", match: { "data.x": "{{ steps.w.output }}" } }] }, 'cancel_on[0].match["data.x"]'],
    [{ ...wait({}), cancel_on: [{ event_type: "a.b", match: "x" }] }, "cancel_on[0].match"],
    [{ ...wait({}), cancel_on: [{ event_type: "a.b", when: 1 }] }, "cancel_on[0].when"],
  ])("refuses %j naming %s", async (body, param) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(res.body.error.param).toBe(param);
  });

  it("names the limit it refuses", async () => {
    const six = Object.fromEntries(["a", "b", "c", "d", "e", "f"].map((k) => [`data.${k}`, 1]));
    expectError(await post(wait({ match: six })), 400, "parameter_invalid", "steps[0].match");
    expect((await post(wait({ match: six }))).body.error.message).toMatch(/at most 5 paths \(MATCH_KEYS_MAX\)/);
    const many = await post({ ...wait({}), cancel_on: Array.from({ length: 6 }, () => ({ event_type: "a.b" })) });
    expect(many.body.error.message).toMatch(/at most 5 entries \(CANCEL_ON_MAX\)/);
  });
});
