import { waitFor } from "../../tools/procs";
import { expectError, usePlatform } from "../helpers/platform";
import { acmeRuns } from "../helpers/steps";

/** Child runs through the API: run_workflow, a workflow's output, GET /runs?parent_run_id=, cancelling with the parent, limits. */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000", RUN_STARTS_PER_MINUTE: "100000", RUN_DESCENDANTS_MAX: "8" });
const { call, start, ended } = acmeRuns(suite);

async function create(steps: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps, ...extra });
  expect(res.status).toBe(201);
  return res.body.data.id;
}
const runOf = async (wf: string, run: string) => (await call("GET", `/workflows/${wf}/runs/${run}`)).body.data;
const childrenOf = async (run: string) => (await call("GET", `/runs?parent_run_id=${run}&per_page=100`)).body.data as any[];
async function waiting(wf: string, run: string) {
  await waitFor(`run ${run} to wait`, async () => (await runOf(wf, run)).status === "waiting");
  return runOf(wf, run);
}

describe("run_workflow", () => {
  it("waits for the child and gives its output; the child shows its parent and is listed under it", async () => {
    const price = await create([{ id: "calc", type: "set", output: { total: "{{ input.qty * 2.5 }}" } }], {
      output: { total: "{{ steps.calc.output.total }}", currency: "EUR" },
    });
    const order = await create([
      { id: "charge", type: "run_workflow", workflow_id: price, input: { qty: "{{ input.qty }}" } },
      { id: "receipt", type: "set", output: "paid {{ steps.charge.output.output.total }} {{ steps.charge.output.output.currency }}" },
    ]);
    const run = await ended(order, await start(order, { qty: 4 }));
    expect(run.status).toBe("succeeded");
    const [child] = await childrenOf(run.id);
    expect(run.steps[0]).toMatchObject({
      status: "succeeded",
      output: { run_id: child.id, status: "succeeded", output: { total: 10, currency: "EUR" } },
    });
    expect(run.output).toBe("paid 10 EUR");
    expect(run.parent).toBeNull();
    expect(child).toMatchObject({
      workflow_id: price,
      status: "succeeded",
      input: { qty: 4 },
      trigger: { type: "parent" },
      parent: { run_id: run.id, step_id: "charge", index: 0 },
      output: { total: 10, currency: "EUR" },
    });
    expect(await childrenOf(child.id)).toEqual([]);
  });

  it("with wait false, succeeds at once with the child's id while the child goes on", async () => {
    const slow = await create([{ id: "ok", type: "approval", message: "go?" }]);
    const fire = await create([{ id: "kick", type: "run_workflow", workflow_id: slow, wait: false }]);
    const run = await ended(fire, await start(fire));
    expect(run.status).toBe("succeeded");
    const childId = run.steps[0].output.run_id;
    expect(run.steps[0].output).toEqual({ run_id: childId });
    expect(run.output).toEqual({ run_id: childId });
    const child = await waiting(slow, childId);
    expect(child.parent).toEqual({ run_id: run.id, step_id: "kick", index: 0 });
  });

  it("a failing child fails the step: the run fails, or goes on under on_error continue; a retry starts a new child", async () => {
    const failing = await create([{ id: "no", type: "stop", status: "failed", message: "out of stock" }]);
    const strict = await create([{ id: "call", type: "run_workflow", workflow_id: failing }]);
    const lenient = await create([
      { id: "call", type: "run_workflow", workflow_id: failing, on_error: "continue" },
      { id: "after", type: "set", output: "{{ steps.call.status + ' ' + steps.call.error.code }}" },
    ]);
    const failed = await ended(strict, await start(strict));
    expect(failed.status).toBe("failed");
    const [child] = await childrenOf(failed.id);
    expect(failed.steps[0]).toMatchObject({ status: "failed", error_code: "child_failed", output: { run_id: child.id, status: "failed" } });
    expect(failed.steps[0].error).toBe(`the child run ${child.id} failed at its step 'no': out of stock`);
    const went = await ended(lenient, await start(lenient));
    expect(went.status).toBe("succeeded");
    expect(went.steps[1].output).toBe("failed child_failed");

    expect((await call("POST", `/workflows/${strict}/runs/${failed.id}/retry`)).status).toBe(200);
    const again = await ended(strict, failed.id);
    expect(again).toMatchObject({ status: "failed", attempt: 2 });
    const children = await childrenOf(failed.id);
    expect(children).toHaveLength(2);
    expect(again.steps[0].output.run_id).toBe(children[0].id);
    expect(children[0].id).not.toBe(child.id);
  });

  it("a child not ended within the step's timeout_ms is cancelled and the step fails with timed_out", async () => {
    const slow = await create([{ id: "ok", type: "approval" }]);
    const wf = await create([
      { id: "call", type: "run_workflow", workflow_id: slow, timeout_ms: 300, on_error: "continue" },
      { id: "after", type: "set", output: "{{ steps.call.error.code }}" },
    ]);
    const run = await ended(wf, await start(wf));
    expect(run.status).toBe("succeeded");
    const [child] = await childrenOf(run.id);
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "timed_out", output: { run_id: child.id, status: "cancelled" } });
    expect(run.steps[1].output).toBe("timed_out");
    expect(await ended(slow, child.id)).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended" });
  });

  it("cancelling a parent cancels its waiting children, and theirs", async () => {
    const leaf = await create([{ id: "ok", type: "approval" }]);
    const middle = await create([{ id: "leaf", type: "run_workflow", workflow_id: leaf }]);
    const top = await create([{ id: "middle", type: "run_workflow", workflow_id: middle }]);
    const run = await start(top);
    let grandchild: any;
    await waitFor("the grandchild to wait", async () => {
      const [child] = await childrenOf(run);
      grandchild = child && (await childrenOf(child.id))[0];
      return grandchild?.status === "waiting";
    });
    expect((await runOf(top, run)).status).toBe("waiting");
    expect((await call("POST", `/workflows/${top}/runs/${run}/cancel`)).status).toBe(200);
    const child = (await childrenOf(run))[0];
    const gone = await ended(leaf, grandchild.id);
    expect(gone).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended", cancelled_by: null });
    expect(await ended(middle, child.id)).toMatchObject({ status: "cancelled", cancel_reason: "parent_ended" });
    expect(await runOf(top, run)).toMatchObject({ status: "cancelled", cancel_reason: "requested" });
  });

  it("lists a run's children newest first, paginated, and only the tenant's", async () => {
    const leaf = await create([{ id: "x", type: "set", output: 1 }]);
    const many = await create([1, 2, 3].map((n) => ({ id: `c${n}`, type: "run_workflow", workflow_id: leaf, wait: false })));
    const run = await ended(many, await start(many));
    const page = await call("GET", `/runs?parent_run_id=${run.id}&limit=2`);
    expect(page.status).toBe(200);
    expect(page.body.data.map((r: any) => r.parent.step_id)).toEqual(["c3", "c2"]);
    expect(page.body.meta).toMatchObject({ has_more: true });
    const next = await call("GET", `/runs?parent_run_id=${run.id}&limit=2&starting_after=${page.body.data[1].id}`);
    expect(next.body.data.map((r: any) => r.parent.step_id)).toEqual(["c1"]);
    const globex = await fetch(`${suite.p.baseUrl}/runs?parent_run_id=${run.id}`, {
      headers: { authorization: `Bearer ${suite.globex.live}` },
    });
    expect(((await globex.json()) as any).data).toEqual([]);
  });
});

describe("limits", () => {
  it("nesting deeper than 5 levels fails the step naming the limit, and each parent with it", async () => {
    // The workflow runs itself: its id comes from a template, so only the run can tell the depth.
    const deep = await create([{ id: "again", type: "run_workflow", workflow_id: "{{ workflow.id }}" }]);
    const root = await ended(deep, await start(deep));
    expect(root.status).toBe("failed");
    let at = root;
    const chain = [];
    for (;;) {
      const [child] = await childrenOf(at.id);
      if (!child) break;
      chain.push(child);
      at = await ended(deep, child.id);
    }
    expect(chain).toHaveLength(5);
    expect(at.steps[0]).toMatchObject({ status: "failed", error_code: "limit_reached" });
    expect(at.steps[0].error).toMatch(/at most 5 levels deep \(MAX_NESTING\)/);
    expect(root.steps[0].error_code).toBe("child_failed");
  });

  it("more runs than RUN_DESCENDANTS_MAX under one root fail the step naming the limit", async () => {
    const leaf = await create([{ id: "x", type: "set", output: 1 }]);
    const steps = Array.from({ length: 10 }, (_, n) => ({ id: `c${n}`, type: "run_workflow", workflow_id: leaf, wait: false }));
    const many = await create(steps);
    const run = await ended(many, await start(many));
    expect(run.status).toBe("failed");
    expect(run.steps.map((s: any) => s.status)).toEqual([...Array(8).fill("succeeded"), "failed", "skipped"]);
    expect(run.steps[8]).toMatchObject({ error_code: "limit_reached" });
    expect(run.steps[8].error).toMatch(/at most 8 runs may descend from one root run/);
    expect(await childrenOf(run.id)).toHaveLength(8);
  });

  it("a workflow id from a template that names no workflow of the environment fails the step clearly", async () => {
    const theirs = await fetch(`${suite.p.baseUrl}/workflows`, {
      method: "POST",
      headers: { authorization: `Bearer ${suite.globex.live}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "g", trigger: { type: "manual" }, steps: [{ id: "x", type: "set", output: 1 }] }),
    });
    const globexWf = ((await theirs.json()) as any).data.id as string;
    const wf = await create([{ id: "go", type: "run_workflow", workflow_id: "{{ input.target }}" }]);
    const run = await ended(wf, await start(wf, { target: globexWf }));
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "workflow_not_found" });
    expect(run.steps[0].error).toBe(`no workflow '${globexWf}' in this environment`);
    const bad = await ended(wf, await start(wf, { target: "nope" }));
    expect(bad.steps[0].error).toMatch(/workflow_id gave "nope", which is not a workflow id/);
    const leaf = await create([{ id: "x", type: "set", output: 1 }]);
    const doubling = await create([{ id: "go", type: "run_workflow", workflow_id: leaf, input: { s: "{{ input.s + input.s }}" } }]);
    const big = await ended(doubling, await start(doubling, { s: "x".repeat(40 * 1024) }));
    expect(big.steps[0]).toMatchObject({ status: "failed", error_code: "step_failed" });
    expect(big.steps[0].error).toMatch(/the child's input, once its templates are filled, is over 65536 bytes/);
    expect(await childrenOf(big.id)).toEqual([]);
  });
});

describe("validation on write", () => {
  const write = (steps: unknown[], extra: Record<string, unknown> = {}) =>
    call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps, ...extra });
  const set = { id: "first", type: "set", output: 1 };

  it("names the field at fault", async () => {
    const theirs = await fetch(`${suite.p.baseUrl}/workflows`, {
      method: "POST",
      headers: { authorization: `Bearer ${suite.globex.live}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "g", trigger: { type: "manual" }, steps: [set] }),
    });
    const globexWf = ((await theirs.json()) as any).data.id as string;
    expectError(
      await write([set, { id: "c", type: "run_workflow", workflow_id: globexWf }]),
      400,
      "parameter_invalid",
      "steps[1].workflow_id",
    );
    expectError(
      await write([set, { id: "c", type: "run_workflow", workflow_id: "wf_01jdx3q8k9m2n4p6r8s0t2v4w6" }]),
      400,
      "parameter_invalid",
      "steps[1].workflow_id",
    );
    expectError(await write([{ id: "c", type: "run_workflow", workflow_id: 7 }]), 400, "parameter_invalid", "steps[0].workflow_id");
    expectError(await write([{ id: "c", type: "run_workflow" }]), 400, "parameter_invalid", "steps[0].workflow_id");
    const ok = await create([set]);
    expectError(await write([{ id: "c", type: "run_workflow", workflow_id: ok, wait: "yes" }]), 400, "parameter_invalid", "steps[0].wait");
    expectError(await write([{ id: "c", type: "run_workflow", workflow_id: ok, input: [1] }]), 400, "parameter_invalid", "steps[0].input");
    expectError(
      await write([{ id: "c", type: "run_workflow", workflow_id: ok, input: { a: "{{ steps.later.output }}" } }]),
      400,
      "parameter_invalid",
      "steps[0].input.a",
    );
    expectError(await write([{ id: "c", type: "run_workflow", workflow_id: ok, retry: {} }]), 400, "parameter_unknown", "steps[0].retry");
    expectError(
      await write([{ id: "c", type: "run_workflow", workflow_id: ok, wait: false, timeout_ms: 5 }]),
      400,
      "parameter_invalid",
      "steps[0].timeout_ms",
    );
    expectError(
      await write([{ id: "c", type: "run_workflow", workflow_id: ok, timeout_ms: 0 }]),
      400,
      "parameter_invalid",
      "steps[0].timeout_ms",
    );
    expectError(await write([set], { output: { a: "{{ steps.nope.output }}" } }), 400, "parameter_invalid", "output.a");
    expectError(await write([set], { output: { a: "{{ input.( }}" } }), 400, "parameter_invalid", "output.a");
  });

  it("a workflow's output is kept, shown, changed and removed by PATCH; one that cannot be filled fails the run", async () => {
    const wf = await create([set], { output: { n: "{{ steps.first.output + 1 }}" } });
    expect((await call("GET", `/workflows/${wf}`)).body.data.output).toEqual({ n: "{{ steps.first.output + 1 }}" });
    expect((await ended(wf, await start(wf))).output).toEqual({ n: 2 });
    expect((await call("PATCH", `/workflows/${wf}`, { output: "{{ input.missing + 1 }}" })).status).toBe(200);
    const failed = await ended(wf, await start(wf));
    expect(failed).toMatchObject({ status: "failed", output: null, error: { code: "template_error" } });
    expect(failed.steps[0].status).toBe("succeeded");
    const removed = await call("PATCH", `/workflows/${wf}`, { output: null });
    expect(removed.body.data.output).toBeUndefined();
    expect((await ended(wf, await start(wf))).output).toBe(1);
  });
});
