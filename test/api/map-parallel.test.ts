import fc from "fast-check";
import { waitFor } from "../../tools/procs";
import { expectError, usePlatform } from "../helpers/platform";
import { acmeRuns, useStepTarget } from "../helpers/steps";

/** map and parallel steps through the API: children per item and branch, concurrency, tolerated failures, cancelling. */
const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  RATE_LIMIT_MAX: "100000",
  RUN_STARTS_PER_MINUTE: "100000",
  WORKFLOW_RETRY_BASE_MS: "20",
});
const { call, start, ended } = acmeRuns(suite);
const on = useStepTarget();

async function create(steps: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps, ...extra });
  expect([res.status, res.body.error]).toEqual([201, undefined]);
  return res.body.data.id;
}
const write = (steps: unknown[]) => call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps });
const childrenOf = async (run: string) => {
  const all: any[] = [];
  let cursor = "";
  for (;;) {
    const page = (await call("GET", `/runs?parent_run_id=${run}&per_page=100${cursor}`)).body;
    all.push(...page.data);
    if (!page.has_more) return all;
    cursor = `&starting_after=${page.data[page.data.length - 1].id}`;
  }
};

describe("map", () => {
  it("runs its steps once per item, with item and index as the child's input, and gives each output in item order", async () => {
    const wf = await create([
      {
        id: "each",
        type: "map",
        items: "{{ input.orders }}",
        max_concurrency: 2,
        steps: [{ id: "double", type: "set", output: { n: "{{ input.item.qty * 2 }}", at: "{{ input.index }}" } }],
      },
      { id: "sum", type: "set", output: "{{ steps.each.output.succeeded }} of {{ steps.each.output.count }}" },
    ]);
    const run = await ended(wf, await start(wf, { orders: [{ qty: 1 }, { qty: 2 }, { qty: 3 }] }));
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].output).toEqual({
      count: 3,
      succeeded: 3,
      failed: 0,
      results: [
        { n: 2, at: 0 },
        { n: 4, at: 1 },
        { n: 6, at: 2 },
      ],
      results_truncated: false,
      failed_indexes: [],
    });
    expect(run.output).toBe("3 of 3");
    const children = await childrenOf(run.id);
    expect(children.map((c) => c.parent.index).sort()).toEqual([0, 1, 2]);
    expect(children[0]).toMatchObject({ workflow_id: wf, trigger: { type: "parent" }, parent: { run_id: run.id, step_id: "each" } });
  });

  it("runs a saved workflow per item, and an empty list succeeds at once", async () => {
    const leaf = await create([{ id: "echo", type: "set", output: "{{ input.item }}" }]);
    const wf = await create([{ id: "each", type: "map", items: "{{ input.list }}", workflow_id: leaf }]);
    const run = await ended(wf, await start(wf, { list: ["a", "b"] }));
    expect(run.steps[0].output).toMatchObject({ count: 2, succeeded: 2, results: ["a", "b"] });
    const none = await ended(wf, await start(wf, { list: [] }));
    expect(none.steps[0]).toMatchObject({ status: "succeeded", output: { count: 0, results: [] } });
  });

  it("tolerates tolerated_failures failed children; one more fails the step and cancels the unfinished ones", async () => {
    const steps = [
      { id: "gate", type: "stop", status: "failed", if: "input.item == 'bad'" },
      { id: "hold", type: "approval", if: "input.item == 'slow'" },
      { id: "ok", type: "set", output: "{{ input.item }}" },
    ];
    const tolerant = await create([{ id: "each", type: "map", items: "{{ input.list }}", tolerated_failures: 1, steps }]);
    const one = await ended(tolerant, await start(tolerant, { list: ["a", "bad", "c"] }));
    expect(one.status).toBe("succeeded");
    expect(one.steps[0].output).toMatchObject({ count: 3, succeeded: 2, failed: 1, results: ["a", null, "c"], failed_indexes: [1] });

    const strict = await create([{ id: "each", type: "map", items: "{{ input.list }}", max_concurrency: 3, tolerated_failures: 1, steps }]);
    const run = await ended(strict, await start(strict, { list: ["bad", "slow", "bad", "x", "y"] }));
    expect(run.status).toBe("failed");
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "child_failed" });
    expect(run.steps[0].error).toMatch(/2 of its children failed.*tolerated_failures: 1/);
    const children = await childrenOf(run.id);
    const slow = children.find((c) => c.input.item === "slow");
    expect(slow).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended" });
  });

  it("a retry of the run re-runs only the items whose child failed, keeping the others' results", async () => {
    let bFails = true;
    on.target.answer = (_n, req) => (req.path === "/b" && bFails ? { status: 500, json: {} } : { status: 200, json: { got: req.path } });
    const wf = await create([
      {
        id: "each",
        type: "map",
        items: "{{ input.list }}",
        max_concurrency: 1,
        steps: [
          { id: "call", type: "http", method: "POST", url: `${on.target.url}/{{ input.item }}` },
          { id: "out", type: "set", output: "{{ steps.call.output.body.got }}" },
        ],
      },
    ]);
    const id = await start(wf, { list: ["a", "b", "c"] });
    const first = await ended(wf, id);
    expect(first.steps[0]).toMatchObject({ status: "failed", output: { succeeded: 1, failed: 1, results: ["/a", null, null] } });
    bFails = false;
    expect((await call("POST", `/workflows/${wf}/runs/${id}/retry`)).status).toBe(200);
    const run = await ended(wf, id);
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].output).toMatchObject({ count: 3, succeeded: 3, failed: 0, results: ["/a", "/b", "/c"] });
    expect(on.target.got.map((r) => r.path)).toEqual(["/a", "/b", "/b", "/c"]);
    expect((await childrenOf(id)).length).toBe(4);
  });

  it("a cancelled run cancels its map's unfinished children", async () => {
    const wf = await create([{ id: "each", type: "map", items: "{{ input.list }}", steps: [{ id: "hold", type: "approval" }] }]);
    const id = await start(wf, { list: [1, 2, 3] });
    await waitFor("three children waiting", async () => (await childrenOf(id)).filter((c) => c.status === "waiting").length === 3);
    expect((await call("POST", `/workflows/${wf}/runs/${id}/cancel`)).status).toBe(200);
    await waitFor("the children cancelled", async () => (await childrenOf(id)).every((c) => c.status === "cancelled"));
    expect((await childrenOf(id)).map((c) => c.cancel_reason)).toEqual(["parent_ended", "parent_ended", "parent_ended"]);
  });

  it("fails with limit_reached beyond 1,000 items, naming the limit", async () => {
    const wf = await create([{ id: "each", type: "map", items: "{{ input.list }}", steps: [{ id: "s", type: "set", output: 1 }] }]);
    const run = await ended(wf, await start(wf, { list: Array.from({ length: 1001 }, (_, i) => i) }));
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "limit_reached" });
    expect(run.steps[0].error).toMatch(/at most 1000 items/);
    expect(await childrenOf(run.id)).toEqual([]);
  });

  it("keeps at most max_concurrency children unfinished over 1,000 items", async () => {
    const N = 1000;
    let active = 0;
    let most = 0;
    on.target.answer = (_n, req) => {
      if (req.path === "/begin") most = Math.max(most, ++active);
      if (req.path === "/end") active -= 1;
      return { status: 200, json: {} };
    };
    const wf = await create([
      {
        id: "each",
        type: "map",
        items: "{{ input.list }}",
        max_concurrency: 10,
        steps: [
          { id: "begin", type: "http", method: "POST", url: `${on.target.url}/begin`, body: { i: "{{ input.index }}" } },
          { id: "end", type: "http", method: "POST", url: `${on.target.url}/end`, body: { i: "{{ input.index }}" } },
          { id: "out", type: "set", output: "{{ input.index }}" },
        ],
      },
    ]);
    const id = await start(wf, { list: Array.from({ length: N }, (_, i) => i) });
    let run: any;
    await waitFor(
      `run ${id} to end`,
      async () =>
        ["succeeded", "failed", "cancelled"].includes((run = (await call("GET", `/workflows/${wf}/runs/${id}`)).body.data).status),
      240_000,
    ).catch(async (err) => {
      const kids = await childrenOf(id);
      const by: Record<string, number> = {};
      for (const k of kids) by[k.status] = (by[k.status] ?? 0) + 1;
      console.log(
        JSON.stringify({
          step: run.steps[0],
          by,
          most,
          active,
          got: on.target.got.length,
          odd: kids.filter((k) => k.status !== "succeeded").slice(0, 3),
        }),
      );
      throw err;
    });
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].output).toMatchObject({ count: N, succeeded: N, failed: 0 });
    expect(run.steps[0].output.results.slice(0, 3)).toEqual([0, 1, 2]);
    expect(on.target.got.filter((r) => r.path === "/begin")).toHaveLength(N);
    expect(most).toBeLessThanOrEqual(10);
    expect(most).toBeGreaterThan(1);
    expect(active).toBe(0);
  }, 300_000);

  it("names the field inside inline steps on write", async () => {
    const map = (steps: unknown) => ({ id: "each", type: "map", items: "{{ input.list }}", steps });
    expectError(
      await write([
        { id: "a", type: "set", output: 1 },
        { id: "b", type: "set", output: 2 },
        map([{ id: "x", type: "http", url: "nope" }]),
      ]),
      400,
      "parameter_invalid",
      "steps[2].steps[0].url",
    );
    expectError(await write([{ ...map([]), max_concurrency: 101 }]), 400, "parameter_invalid", "steps[0].max_concurrency");
    expectError(await write([{ id: "each", type: "map", items: "{{ input.list }}" }]), 400, "parameter_invalid", "steps[0].steps");
    expectError(await write([{ ...map([{ id: "s", type: "set", output: 1 }]), items: 3 }]), 400, "parameter_invalid", "steps[0].items");
    const unknown = "wf_01jdx3q8k9m2n4p6r8s0t2v4w6";
    expectError(
      await write([map([{ id: "c", type: "run_workflow", workflow_id: unknown }])]),
      400,
      "parameter_invalid",
      "steps[0].steps[0].workflow_id",
    );
    expectError(
      await write([
        {
          id: "p",
          type: "parallel",
          branches: { crm: [{ ...map([{ id: "s", type: "set", output: 1 }]), steps: undefined, workflow_id: unknown }] },
        },
      ]),
      400,
      "parameter_invalid",
      "steps[0].branches.crm[0].workflow_id",
    );
    let nested: unknown = [{ id: "s", type: "set", output: 1 }];
    for (let i = 0; i < 6; i += 1) nested = [map(nested)];
    expect((await write(nested as unknown[])).status).toBe(400);
  });
});

describe("map and parallel fields on write", () => {
  const SET = [{ id: "s", type: "set", output: 1 }];
  const notWhole = fc.oneof(
    fc.double({ noInteger: true }),
    fc.string(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.nat(), { maxLength: 2 }),
  );
  const bad: Record<string, fc.Arbitrary<[string, Record<string, unknown>]>> = {
    max_concurrency: fc
      .oneof(fc.integer({ max: 0 }), fc.integer({ min: 101 }), notWhole)
      .map((v) => ["steps[0].max_concurrency", { max_concurrency: v }]),
    tolerated_failures: fc
      .oneof(fc.integer({ max: -1 }), fc.integer({ min: 1001 }), notWhole)
      .map((v) => ["steps[0].tolerated_failures", { tolerated_failures: v }]),
    items: fc
      .oneof(
        fc.string().filter((v) => !v.includes("{{")),
        fc.integer(),
        fc.dictionary(fc.string(), fc.nat(), { maxKeys: 2 }),
        fc.constant(null),
      )
      .map((v) => ["steps[0].items", { items: v }]),
  };

  it("a map field of a wrong class is a 400 naming it", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(...Object.values(bad)), async ([param, change]) => {
        const res = await write([{ id: "each", type: "map", items: "{{ input.list }}", steps: SET, ...change }]);
        expect([res.status, res.body.error?.param]).toEqual([400, param]);
      }),
      { numRuns: 60 },
    );
  });

  it("a branch name or a branch list of a wrong class is a 400 naming the branch", async () => {
    const name = fc.string({ minLength: 1, maxLength: 60 }).filter((n) => !/^[a-z][a-z0-9_]{0,49}$/.test(n));
    const list = fc.oneof(fc.constant([]), fc.string(), fc.nat(), fc.constant(null), fc.constant({}));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          name.map((n) => [n, SET] as const),
          list.map((l) => ["crm", l] as const),
        ),
        async ([branch, steps]) => {
          const res = await write([{ id: "p", type: "parallel", branches: { [branch]: steps } }]);
          expect(res.status).toBe(400);
          expect(res.body.error.param).toMatch(/^steps\[0\]\.branches/);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("parallel", () => {
  it("runs each branch as a child and gives each branch's output by name", async () => {
    const wf = await create([
      {
        id: "both",
        type: "parallel",
        branches: {
          crm: [{ id: "c", type: "set", output: "crm {{ input.who }}" }],
          billing: [{ id: "b", type: "set", output: "billing {{ input.who }}" }],
        },
      },
    ]);
    const run = await ended(wf, await start(wf, { who: "ada" }));
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].output).toMatchObject({
      crm: { status: "succeeded", output: "crm ada" },
      billing: { status: "succeeded", output: "billing ada" },
    });
  });

  it("a failing branch cancels the others; with on_error continue every branch ends and the run goes on", async () => {
    const branches = {
      slow: [{ id: "hold", type: "approval" }],
      bad: [{ id: "no", type: "stop", status: "failed", message: "nope" }],
    };
    const wf = await create([{ id: "both", type: "parallel", branches }]);
    const run = await ended(wf, await start(wf));
    expect(run.status).toBe("failed");
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "child_failed", error: "the branch 'bad' failed" });
    expect(run.steps[0].output).toMatchObject({ slow: { status: "cancelled" }, bad: { status: "failed" } });
    const slow = (await childrenOf(run.id)).find((c) => c.parent.index === 0);
    expect(slow).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended" });

    const lenient = await create([
      { id: "both", type: "parallel", on_error: "continue", branches: { ok: [{ id: "s", type: "set", output: 1 }], bad: branches.bad } },
      { id: "after", type: "set", output: "{{ steps.both.status == 'failed' ? steps.both.output.bad.status : 'none' }}" },
    ]);
    const goes = await ended(lenient, await start(lenient));
    expect(goes.status).toBe("succeeded");
    expect(goes.steps[0]).toMatchObject({
      status: "failed",
      error: "the branch 'bad' failed",
      output: { ok: { status: "succeeded", output: 1 }, bad: { status: "failed" } },
    });
    expect(goes.output).toBe("failed");
  });

  it("names the field inside a branch on write", async () => {
    expectError(
      await write([{ id: "p", type: "parallel", branches: { crm: [{ id: "x", type: "http", url: 5 }] } }]),
      400,
      "parameter_invalid",
      "steps[0].branches.crm[0].url",
    );
    const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`b${i}`, [{ id: "s", type: "set", output: 1 }]]));
    expectError(await write([{ id: "p", type: "parallel", branches: eleven }]), 400, "parameter_invalid", "steps[0].branches");
  });
});
