import { finish, render, retryDelay, type RunDoc } from "../../services/workflows/runs.logic";

describe("templates", () => {
  const scope = { input: { order: { id: "o1", qty: 3, tags: ["a"] } }, steps: { fetch: { output: { body: { ref: "R-1", n: null } } } } };

  it("a whole-string template keeps the value's type; inside text values become text", () => {
    expect(render("{{input.order.qty}}", scope)).toBe(3);
    expect(render("{{ input.order.tags }}", scope)).toEqual(["a"]);
    expect(render("qty={{input.order.qty}} tags={{input.order.tags}}", scope)).toBe('qty=3 tags=["a"]');
    expect(render("/orders/{{input.order.id}}/{{steps.fetch.output.body.ref}}", scope)).toBe("/orders/o1/R-1");
  });

  it("a missing value is null alone and nothing inside text", () => {
    expect(render("{{input.nope.deeper}}", scope)).toBeNull();
    expect(render("x{{steps.other.output.id}}y{{steps.fetch.output.body.n}}z", scope)).toBe("xyz");
  });

  it("fills nested objects and lists, and leaves other values alone", () => {
    expect(render({ a: ["{{input.order.id}}", 1, true, null], b: { c: "{{input.order.qty}}" } }, scope)).toEqual({
      a: ["o1", 1, true, null],
      b: { c: 3 },
    });
  });
});

describe("finishing a run", () => {
  const run = {
    id: "run_1",
    workflow_id: "wf_1",
    cursor: 1,
    outbox: [],
    steps: [
      { id: "a", status: "succeeded" },
      { id: "b", status: "running", started_at: "t0" },
      { id: "c", status: "pending" },
    ],
  } as unknown as RunDoc;

  it("ends the current step as told, skips the rest and queues workflow.completed", () => {
    const set = finish(run, "failed", "t1", "failed", "boom");
    expect(set.status).toBe("failed");
    expect(set.finished_at).toBe("t1");
    expect(set.steps!.map((s) => s.status)).toEqual(["succeeded", "failed", "skipped"]);
    expect(set.steps![1]).toMatchObject({ error: "boom", started_at: "t0", finished_at: "t1" });
    expect(set.outbox).toEqual([
      { id: expect.stringMatching(/^evt_/), type: "workflow.completed", data: { workflow_id: "wf_1", run_id: "run_1", status: "failed" } },
    ]);
  });
});

it("http retries back off exponentially up to a minute", () => {
  expect([1, 2, 3, 4].map((n) => retryDelay(1000, n))).toEqual([1000, 2000, 4000, 8000]);
  expect(retryDelay(1000, 20)).toBe(60_000);
});
