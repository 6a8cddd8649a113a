import fc from "fast-check";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "../../tools/procs";
import { expectError, usePlatform } from "../helpers/platform";
import { acmeRuns, useStepTarget } from "../helpers/steps";
import { expression } from "../helpers/cel-arbitraries";

/** The workflow language through the API: expressions, conditions, stop, set, on_error (docs/workflows/language.md). */
const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WORKFLOW_RETRY_BASE_MS: "30",
  // Generated cases write and start many times within a minute.
  RATE_LIMIT_MAX: "100000",
  RUN_STARTS_PER_MINUTE: "100000",
});
const steps = useStepTarget();
const { call, workflow, start, ended } = acmeRuns(suite);

const completion = async (runId: string): Promise<any> => {
  let found: any;
  await waitFor(`run ${runId}'s workflow.completed`, async () => {
    const events = (await call("GET", "/events?type=workflow.completed&per_page=100")).body.data;
    found = events.find((e: any) => e.data.run_id === runId);
    return found !== undefined;
  });
  return found.data;
};

describe("expressions in templates", () => {
  it("compute values with their JSON types; the path forms keep their meaning", async () => {
    const wf = await workflow([
      {
        id: "shape",
        type: "set",
        output: {
          total: "{{ input.qty * input.price }}",
          cents: "{{ input.qty * 100 }}",
          email: "{{ input.email.trim().lower() }}",
          tags: "{{ input.tags.join(', ') }}",
          label: "order {{ input.id }} of {{ size(input.tags) }} tags",
          old: "{{input.missing}}",
          fallback: "{{ default(input.coupon, 'none') }}",
          run: "{{ run.id == '' ? 'no' : 'yes' }}",
        },
      },
      { id: "use", type: "set", output: "{{ steps.shape.output.total > 10 && steps.shape.status == 'succeeded' }}" },
    ]);
    const run = await ended(wf.id, await start(wf.id, { qty: 3, price: 4.5, email: " Ada@Example.COM ", tags: ["a", "b"], id: 7 }));
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].output).toEqual({
      total: 13.5,
      cents: 300,
      email: "ada@example.com",
      tags: "a, b",
      label: "order 7 of 2 tags",
      old: null,
      fallback: "none",
      run: "yes",
    });
    expect(run.steps[1].output).toBe(true);
  });

  it("a missing value read by an expression fails the step with template_error, naming the expression", async () => {
    const wf = await workflow([{ id: "shape", type: "set", output: { v: "{{ input.order.total * 2 }}" } }]);
    const run = await ended(wf.id, await start(wf.id, { order: {} }));
    expect(run.status).toBe("failed");
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "template_error" });
    expect(run.steps[0].error).toMatch(/input\.order\.total \* 2.*No such key: total/);
    const done = await completion(run.id);
    expect(done.failed_step).toEqual({ id: "shape", error: { code: "template_error", message: run.steps[0].error } });
  });

  it.each([
    [{ id: "a", type: "set", output: "{{ input.a + }}" }, "steps[0].output", /Unexpected token: EOF at character 12/],
    [{ id: "a", type: "set", output: { x: ["{{ 1 + 'a' }}"] } }, "steps[0].output.x[0]", /no such overload/],
    [{ id: "a", type: "set", output: "{{ steps.later.output }}" }, "steps[0].output", /'later', which is not an earlier step/],
    [{ id: "a", type: "set", output: "{{ event.data }}" }, "steps[0].output", /Unknown variable: event/],
    [{ id: "a", type: "set", output: "x", if: "input.a +" }, "steps[0].if", /at character/],
    [{ id: "a", type: "set", output: "x", if: "'text'" }, "steps[0].if", /gives string, not a boolean/],
    [{ id: "a", type: "emit", event_type: "a.b", data: { t: "{{ 'Bearer ' + secrets.T }}" } }, "steps[0].data.t", /secrets/],
    [{ id: "a", type: "set", output: `{{ ${"1 + ".repeat(600)}1 }}` }, "steps[0].output", /at most 2000/],
    [{ id: "a", type: "stop", status: "done" }, "steps[0].status", /"succeeded", "failed"/],
    [{ id: "a", type: "stop", status: "failed", on_error: "continue" }, "steps[0].on_error", /takes no on_error/],
    [{ id: "a", type: "set", output: 1, on_error: "ignore" }, "steps[0].on_error", /"fail" or "continue"/],
  ])("refuses a bad expression or field when written, naming the step, the field and the position (%#)", async (step, param, message) => {
    const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps: [step] });
    expectError(res, 400, "parameter_invalid", param);
    expect(res.body.error.message).toMatch(message);
  });
});

describe("if, stop, set and on_error", () => {
  it("a false if skips the step (output null) and the run goes on; later steps can test its status", async () => {
    const wf = await workflow([
      { id: "big", type: "http", url: `${steps.target.url}/big`, if: "input.amount >= 500" },
      { id: "small", type: "set", if: "{{ input.amount < 500 }}", output: { note: "small order" } },
      { id: "after", type: "set", output: "{{ steps.big.status + '/' + steps.small.status }}" },
    ]);
    const run = await ended(wf.id, await start(wf.id, { amount: 20 }));
    expect(run.status).toBe("succeeded");
    expect(run.steps.map((s: any) => s.status)).toEqual(["skipped", "succeeded", "succeeded"]);
    expect(run.steps[0].output).toBeNull();
    expect(run.steps[2].output).toBe("skipped/succeeded");
    expect(steps.target.got).toHaveLength(0);
  });

  it("an if that gives no boolean fails the step saying so", async () => {
    const wf = await workflow([{ id: "a", type: "set", if: "input.flag", output: 1 }]);
    const run = await ended(wf.id, await start(wf.id, { flag: "yes" }));
    expect(run.status).toBe("failed");
    expect(run.steps[0].error).toMatch(/must give true or false; it gave "yes"/);
  });

  it("a stop step ends the run with its status and message; later steps are skipped", async () => {
    const wf = await workflow([
      { id: "check", type: "stop", if: "input.amount > 1000", status: "failed", message: "amount {{ input.amount }} is over the limit" },
      { id: "done", type: "stop", status: "succeeded", message: "nothing to do" },
      { id: "never", type: "http", url: `${steps.target.url}/never` },
    ]);
    const failed = await ended(wf.id, await start(wf.id, { amount: 5000 }));
    expect(failed).toMatchObject({ status: "failed", stop_message: "amount 5000 is over the limit" });
    expect(failed.steps.map((s: any) => s.status)).toEqual(["failed", "skipped", "skipped"]);
    expect(failed.steps[0]).toMatchObject({ error: "amount 5000 is over the limit", error_code: "stopped" });
    expect(await completion(failed.id)).toMatchObject({
      status: "failed",
      stop_message: "amount 5000 is over the limit",
      failed_step: { id: "check", error: { code: "stopped", message: "amount 5000 is over the limit" } },
    });
    const ok = await ended(wf.id, await start(wf.id, { amount: 5 }));
    expect(ok).toMatchObject({ status: "succeeded", stop_message: "nothing to do" });
    expect(ok.steps.map((s: any) => s.status)).toEqual(["skipped", "succeeded", "skipped"]);
    expect(await completion(ok.id)).toMatchObject({ status: "succeeded", stop_message: "nothing to do", failed_step: null });
    expect(steps.target.got).toHaveLength(0);
  });

  it("on_error: continue leaves the step failed with its error and the run goes on, and succeeds", async () => {
    steps.target.answer = () => ({ status: 503, json: { down: true } });
    const wf = await workflow([
      { id: "crm", type: "http", url: `${steps.target.url}/crm`, on_error: "continue" },
      { id: "note", type: "set", output: { crm: "{{ steps.crm.status }}", why: "{{ steps.crm.error.message }}" } },
    ]);
    const run = await ended(wf.id, await start(wf.id));
    expect(run.status).toBe("succeeded");
    expect(run.steps[0]).toMatchObject({ status: "failed", error: "the server answered 503", error_code: "step_failed" });
    expect(run.steps[1].output).toEqual({ crm: "failed", why: "the server answered 503" });
    expect(await completion(run.id)).toMatchObject({ status: "succeeded", failed_step: null, stop_message: null });
  });

  it("a failed run's workflow.completed names the step it failed at", async () => {
    steps.target.answer = () => ({ status: 500 });
    const wf = await workflow([{ id: "call", type: "http", url: `${steps.target.url}/x` }]);
    const run = await ended(wf.id, await start(wf.id));
    expect(await completion(run.id)).toMatchObject({
      status: "failed",
      failed_step: { id: "call", error: { code: "step_failed", message: "the server answered 500" } },
      stop_message: null,
    });
  });
});

describe("event triggers with patterns and filters", () => {
  const runsOf = async (wfId: string) => (await call("GET", `/workflows/${wfId}/runs`)).body.data as any[];

  it("order.* with a filter: events of the pattern that pass start a run; others start nothing", async () => {
    const create = await call("POST", "/workflows", {
      name: "big orders",
      trigger: { type: "event", event_type: "lang_test.*", filter: "event.data.amount >= 500" },
      steps: [{ id: "note", type: "set", output: "{{ input.event.type + ':' + string(input.event.data.amount) }}" }],
    });
    expect(create.status).toBe(201);
    expect(create.body.data.trigger).toEqual({ type: "event", event_type: "lang_test.*", filter: "event.data.amount >= 500" });
    const wf = create.body.data;
    const exact = await call("POST", "/workflows", {
      name: "exact",
      trigger: { type: "event", event_type: "lang_test.created" },
      steps: [{ id: "a", type: "set", output: 1 }],
    });
    for (const [type, amount] of [
      ["lang_test.created", 900],
      ["lang_test.updated", 10],
      ["lang_test.updated.late", 900],
      ["other_test.created", 900],
      ["lang_test.paid", 500],
    ] as const)
      expect((await call("POST", "/events", { type, data: { amount } })).status).toBe(201);
    // A missing field: the filter fails on it, which does not pass.
    expect((await call("POST", "/events", { type: "lang_test.created", data: {} })).status).toBe(201);
    await waitFor("the two passing events' runs", async () => (await runsOf(wf.id)).length >= 2);
    await waitFor("the exact workflow's two runs", async () => (await runsOf(exact.body.data.id)).length >= 2);
    // Events are triggered in order of storage: after the last one's run, none of the others can come.
    const marker = await call("POST", "/events", { type: "lang_test.marker", data: { amount: 1000 } });
    await waitFor("the marker's run", async () => (await runsOf(wf.id)).some((r) => r.trigger.event_id === marker.body.data.id));
    const runs = await runsOf(wf.id);
    const done = await Promise.all(runs.map((r) => ended(wf.id, r.id)));
    expect(done.map((r) => r.steps[0].output).sort()).toEqual(["lang_test.created:900", "lang_test.marker:1000", "lang_test.paid:500"]);
  });

  it.each([
    [{ type: "event", event_type: "order.**" }, "trigger.event_type"],
    [{ type: "event", event_type: "order.*x" }, "trigger.event_type"],
    [{ type: "event", event_type: "*" }, "trigger.event_type"],
    [{ type: "event", event_type: "order.*", filter: "event.data.amount >=" }, "trigger.filter"],
    [{ type: "event", event_type: "order.*", filter: "input.a" }, "trigger.filter"],
    [{ type: "event", event_type: "order.*", filter: 5 }, "trigger.filter"],
    [{ type: "manual", filter: "true" }, "trigger.filter"],
  ])("refuses a bad pattern or filter, naming the field (%#)", async (trigger, param) => {
    const res = await call("POST", "/workflows", { name: "wf", trigger, steps: [{ id: "a", type: "set", output: 1 }] });
    expect(res.status).toBe(400);
    expect(res.body.error.param).toBe(param);
  });
});

describe("retry policies and attempts", () => {
  it("a 400 is not retried under retries: N (a 503 is), and every attempt is kept with why it failed", async () => {
    steps.target.answer = (n) => (n < 3 ? { status: 503, json: { n } } : { status: 400, json: { bad: true } });
    const wf = await workflow([{ id: "call", type: "http", url: `${steps.target.url}/r`, retries: 5 }]);
    const run = await ended(wf.id, await start(wf.id));
    expect(run.status).toBe("failed");
    expect(steps.target.got).toHaveLength(3);
    expect(run.steps[0].attempt_count).toBe(3);
    expect(run.steps[0].attempts.map((a: any) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, 503, "the server answered 503"],
      [2, 503, "the server answered 503"],
      [3, 400, "the server answered 400"],
    ]);
    for (const a of run.steps[0].attempts) expect(Date.parse(a.finished_at)).toBeGreaterThanOrEqual(Date.parse(a.started_at));
  });

  it("a policy retries what its on names, waiting as Retry-After asks up to max_interval_ms", async () => {
    steps.target.answer = (n) =>
      n === 1 ? { status: 429, json: {} } : n === 2 ? { status: 418, json: {} } : { status: 200, json: { ok: 1 } };
    const wf = await workflow([
      {
        id: "call",
        type: "http",
        url: `${steps.target.url}/p`,
        retry: { max_attempts: 4, initial_interval_ms: 10, backoff_rate: 2, max_interval_ms: 50, jitter: "none", on: ["429", "4xx"] },
      },
    ]);
    const run = await ended(wf.id, await start(wf.id));
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].attempts.map((a: any) => a.status_code)).toEqual([429, 418, 200]);
  });

  it("keeps the newest 10 attempts", async () => {
    steps.target.answer = () => ({ status: 500, json: {} });
    const wf = await workflow([
      {
        id: "call",
        type: "http",
        url: `${steps.target.url}/many`,
        retry: { max_attempts: 12, initial_interval_ms: 1, backoff_rate: 1, max_interval_ms: 1, jitter: "none", on: ["5xx"] },
      },
    ]);
    const run = await ended(wf.id, await start(wf.id));
    expect(run.steps[0].attempt_count).toBe(12);
    expect(run.steps[0].attempts.map((a: any) => a.attempt)).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it("refuses a bad policy naming its field", async () => {
    const res = await call("POST", "/workflows", {
      name: "wf",
      trigger: { type: "manual" },
      steps: [{ id: "a", type: "http", url: "https://example.com", retry: { max_attempts: 0 } }],
    });
    expectError(res, 400, "parameter_invalid", "steps[0].retry.max_attempts");
  });
});

describe("time limits", () => {
  it("an approval with timeout_ms fails timed_out when no one decides; with on_error: continue the run goes on", async () => {
    const wf = await workflow([
      { id: "gate", type: "approval", message: "ok?", timeout_ms: 300 },
      { id: "after", type: "set", output: "reached" },
    ]);
    const waiting = await start(wf.id);
    const during = (await call("GET", `/workflows/${wf.id}/runs/${waiting}`)).body.data;
    const run = await ended(wf.id, waiting);
    expect(run.status).toBe("failed");
    expect(run.pending_approval).toBeNull();
    expect(run.steps[0]).toMatchObject({
      status: "failed",
      error_code: "timed_out",
      error: "no decision within the step's timeout_ms (300 ms)",
    });
    if (during.status === "waiting") expect(Date.parse(during.steps[0].timeout_at)).toBeGreaterThan(Date.parse(during.steps[0].started_at));
    expect(await completion(run.id)).toMatchObject({ failed_step: { id: "gate", error: { code: "timed_out" } } });

    const tolerant = await workflow([
      { id: "gate", type: "approval", message: null, timeout_ms: 200, on_error: "continue" },
      { id: "after", type: "set", output: "{{ steps.gate.error.code }}" },
    ]);
    const goesOn = await ended(tolerant.id, await start(tolerant.id));
    expect(goesOn.status).toBe("succeeded");
    expect(goesOn.steps[1].output).toBe("timed_out");
  });

  it("a workflow's timeout_ms fails a run still running past it with run_timed_out, whatever it waits for", async () => {
    const create = await call("POST", "/workflows", {
      name: "bounded",
      trigger: { type: "manual" },
      timeout_ms: 400,
      steps: [
        { id: "nap", type: "delay", duration_ms: 60_000 },
        { id: "never", type: "set", output: 1 },
      ],
    });
    expect(create.status).toBe(201);
    expect(create.body.data.timeout_ms).toBe(400);
    const startedAt = Date.now();
    const run = await ended(create.body.data.id, await start(create.body.data.id));
    expect(Date.now() - startedAt).toBeLessThan(30_000);
    expect(run.status).toBe("failed");
    expect(run.steps.map((s: any) => s.status)).toEqual(["failed", "skipped"]);
    expect(run.steps[0]).toMatchObject({ error_code: "run_timed_out" });
    expect(await completion(run.id)).toMatchObject({ failed_step: { id: "nap", error: { code: "run_timed_out" } } });
  });

  it("refuses a bad timeout", async () => {
    const res = await call("POST", "/workflows", {
      name: "wf",
      trigger: { type: "manual" },
      timeout_ms: 0,
      steps: [{ id: "a", type: "set", output: 1 }],
    });
    expectError(res, 400, "parameter_invalid", "timeout_ms");
    const step = await call("POST", "/workflows", {
      name: "wf",
      trigger: { type: "manual" },
      steps: [{ id: "a", type: "approval", timeout_ms: -1 }],
    });
    expectError(step, 400, "parameter_invalid", "steps[0].timeout_ms");
  });
});

describe("POST /workflows/validate", () => {
  it("answers 200 with the definition as it would be stored, storing nothing", async () => {
    const before = (await call("GET", "/workflows?per_page=1")).body.meta;
    const res = await call("POST", "/workflows/validate", {
      name: "draft",
      trigger: { type: "event", event_type: "order.*", filter: "event.data.amount > 5" },
      steps: [
        { type: "http", url: "https://example.com/x", if: "input.event.data.amount > 10" },
        { type: "set", output: "{{ 1 + 1.5 }}" },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      object: "workflow_definition",
      name: "draft",
      description: null,
      status: "active",
      trigger: { type: "event", event_type: "order.*", filter: "event.data.amount > 5" },
      steps: [
        {
          id: "step_1",
          type: "http",
          method: "POST",
          url: "https://example.com/x",
          headers: {},
          body: null,
          timeout_ms: 10_000,
          retries: 0,
          if: "input.event.data.amount > 10",
        },
        { id: "step_2", type: "set", output: "{{ 1 + 1.5 }}" },
      ],
      timeout_ms: null,
    });
    expect((await call("GET", "/workflows?per_page=1")).body.meta).toEqual(before);
  });

  it("answers the same 400 as a create, naming the step, the field and the position", async () => {
    const body = {
      name: "draft",
      trigger: { type: "manual" },
      steps: [
        { id: "a", type: "set", output: "x" },
        { id: "b", type: "set", if: "steps.a.output ==", output: 1 },
      ],
    };
    const validated = await call("POST", "/workflows/validate", body);
    const created = await call("POST", "/workflows", body);
    expectError(validated, 400, "parameter_invalid", "steps[1].if");
    expect(validated.body.error.message).toBe(created.body.error.message);
    expect(validated.body.error.message).toMatch(/at character \d+ of the expression/);
  });
});

describe("docs/workflows/language.md", () => {
  const text = readFileSync(join(__dirname, "../../docs/workflows/language.md"), "utf8");
  const blocks = [...text.matchAll(/(?:<!-- test: (workflow|request (\w+) (\S+)) -->\n)?```json\n([\s\S]*?)```/g)].map((m) => ({
    kind: m[1] === undefined ? "plain" : m[1] === "workflow" ? "workflow" : "request",
    method: m[2],
    path: m[3],
    json: m[4],
  }));

  it("has a whole, valid definition for every construct it describes", async () => {
    expect(blocks.filter((b) => b.kind === "workflow").length).toBeGreaterThanOrEqual(11);
    for (const block of blocks) {
      const body = JSON.parse(block.json);
      if (block.kind === "workflow") {
        const res = await call("POST", "/workflows", body);
        expect({ status: res.status, error: res.body.error, name: body.name }).toEqual({ status: 201, error: undefined, name: body.name });
      } else if (block.kind === "request") {
        const res = await call(block.method as string, (block.path as string).replace(/^\/v1/, ""), body);
        expect(res.status).toBeGreaterThanOrEqual(200);
        expect(res.status).toBeLessThan(300);
      }
    }
  });

  it("its shaping examples give what it says", async () => {
    const shape = JSON.parse(blocks[0].json);
    const wf = await workflow(shape.steps);
    const run = await ended(wf.id, await start(wf.id, { qty: 3, price: 4.5, email: " Ada@Example.com " }));
    expect(run.steps[0].output).toEqual({ total: 13.5, cents: 300, email: "ada@example.com", summary: "order of 3 items" });
    const helpers = JSON.parse(blocks.find((b) => b.json.includes('"Helpers"'))!.json);
    const h = await workflow(helpers.steps);
    const done = await ended(h.id, await start(h.id));
    expect(done.steps[0].output).toEqual({
      sum: 6.5,
      cheapest: 1,
      dearest: 3,
      tags: "a|b",
      shout: "HI",
      count: 3,
      big: [50, 500],
      due: "2024-01-02T12:00:00.000Z",
    });
  });
});

describe("definitions written before the language", () => {
  it("validate and run as before: every step type and template form", async () => {
    const input = { order: { id: "o-1", qty: 3, "with-dash": "d", items: [{ sku: "S1" }] }, note: null };
    const steps_ = [
      {
        id: "call",
        type: "http",
        method: "POST",
        url: `${steps.target.url}/o/{{input.order.id}}/{{input.order.items.0.sku}}?a={{input.missing}}`,
        headers: { "x-a": "{{input.order.id}}", "x-h": "{{ input.order.with-dash }}" },
        body: {
          id: "{{input.order.id}}",
          qty: "{{input.order.qty}}",
          all: "{{input.order}}",
          text: "n={{input.order.qty}} items={{input.order.items}} note={{input.note}}",
          miss: "{{input.nope.deeper}}",
          run: "{{run.id}}",
          attempt: "{{run.attempt}}",
          wf: "{{workflow.id}}",
        },
        retries: 1,
      },
      {
        id: "tell",
        type: "emit",
        event_type: "corpus.told",
        data: { status: "{{steps.call.output.status_code}}", sent: "{{steps.call.output.body.body}}" },
      },
      { id: "nap", type: "delay", duration_ms: 1 },
      { id: "ask", type: "approval", message: "approve {{input.order.id}} ({{steps.call.output.status_code}})" },
    ];
    const validated = await call("POST", "/workflows/validate", { name: "corpus", trigger: { type: "manual" }, steps: steps_ });
    expect(validated.status).toBe(200);
    const wf = await workflow(steps_);
    const runId = await start(wf.id, input);
    let waiting: any;
    await waitFor("the approval", async () => {
      waiting = (await call("GET", `/workflows/${wf.id}/runs/${runId}`)).body.data;
      return waiting.status === "waiting" && waiting.pending_approval !== null;
    });
    expect(waiting.pending_approval.message).toBe("approve o-1 (200)");
    expect((await call("POST", `/workflows/${wf.id}/runs/${runId}/approve`, {})).status).toBe(200);
    const run = await ended(wf.id, runId);
    expect(run.status).toBe("succeeded");
    const [req] = steps.target.got;
    expect(req.path).toBe("/o/o-1/S1?a=");
    expect(req.headers["x-a"]).toBe("o-1");
    expect(req.headers["x-h"]).toBe("d");
    expect(JSON.parse(req.body)).toEqual({
      id: "o-1",
      qty: 3,
      all: input.order,
      text: 'n=3 items=[{"sku":"S1"}] note=',
      miss: null,
      run: runId,
      attempt: 1,
      wf: wf.id,
    });
    const told = (await call("GET", "/events?type=corpus.told&per_page=100")).body.data.find(
      (e: any) => e.id === run.steps[1].output.event_id,
    );
    expect(told.data).toEqual({ status: 200, sent: req.body });
    expect(run.steps.map((s: any) => [s.id, s.status])).toEqual([
      ["call", "succeeded"],
      ["tell", "succeeded"],
      ["nap", "succeeded"],
      ["ask", "succeeded"],
    ]);
  });
});

describe("generated expressions through the API", () => {
  it("are refused with a 400 or run to an end (a value, or the step failed with template_error): never a 5xx, never a stall", async () => {
    // One workflow, its step rewritten for each expression (a new one each would meet the quota of workflows).
    const wf = await workflow([{ id: "x", type: "set", output: 1 }]);
    await fc.assert(
      fc.asyncProperty(expression, fc.jsonValue({ maxDepth: 2 }), async (source, a) => {
        const res = await call("PATCH", `/workflows/${wf.id}`, { steps: [{ id: "x", type: "set", output: `{{ ${source} }}` }] });
        if (res.status === 400) {
          expect(res.body.error.param).toBe("steps[0].output");
          return;
        }
        expect(res.status).toBe(200);
        const run = await ended(wf.id, await start(wf.id, { a, n: 2, s: "a,b", list: [1, 2.5], items: [{ x: 1 }] }));
        if (run.status === "failed")
          expect(run.steps[0]).toMatchObject({ error_code: "template_error", error: expect.stringContaining(source) });
        else expect(run.status).toBe("succeeded");
      }),
      { numRuns: 40 },
    );
  });
});
