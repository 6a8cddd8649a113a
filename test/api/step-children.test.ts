import fc from "fast-check";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";
import { acmeRuns } from "../helpers/steps";

/** GET /runs?parent_run_id=&step_id=: one step's children in item order, paged, scoped to the tenant. */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000", RUN_STARTS_PER_MINUTE: "100000" });
const { call, start, ended } = acmeRuns(suite);

async function create(steps: unknown[]): Promise<string> {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps });
  expect([res.status, res.body.error]).toEqual([201, undefined]);
  return res.body.data.id;
}
const list = (query: string) => call("GET", `/runs?${query}`);
const indexes = (res: { body: { data: any[] } }) => res.body.data.map((r) => r.parent.index);

let wf = "";
let run: any;
beforeAll(async () => {
  // A map of 12 items between two steps whose children are newer and older than its own.
  wf = await create([
    {
      id: "before",
      type: "parallel",
      branches: { left: [{ id: "l", type: "set", output: 1 }], right: [{ id: "r", type: "set", output: 2 }] },
    },
    {
      id: "each",
      type: "map",
      items: "{{ input.list }}",
      max_concurrency: 3,
      steps: [{ id: "x", type: "set", output: "{{ input.item }}" }],
    },
    { id: "after", type: "map", items: [1, 2, 3, 4, 5], steps: [{ id: "y", type: "set", output: 0 }] },
  ]);
  run = await ended(wf, await start(wf, { list: Array.from({ length: 12 }, (_, i) => i) }));
  expect(run.status).toBe("succeeded");
}, 60_000);

describe("GET /runs?parent_run_id=&step_id=", () => {
  it("lists a map's children in item order, #0 first, whatever newer children the run has", async () => {
    const newest = await list(`parent_run_id=${run.id}&per_page=5`);
    expect(newest.body.data.map((r: any) => r.parent.step_id)).toEqual(["after", "after", "after", "after", "after"]);
    const res = await list(`parent_run_id=${run.id}&step_id=each&per_page=100`);
    expect(res.status).toBe(200);
    expect(indexes(res)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(res.body.data.map((r: any) => r.input.item)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(res.body.data.every((r: any) => r.parent.run_id === run.id && r.parent.step_id === "each")).toBe(true);
    expect(res.body.meta).toEqual({ total: 12, page: 1, per_page: 100 });
    const branches = await list(`parent_run_id=${run.id}&step_id=before`);
    expect(indexes(branches)).toEqual([0, 1]);
    expect((await list(`parent_run_id=${run.id}&step_id=each&status=succeeded&per_page=3`)).body.meta.total).toBe(12);
    expect((await list(`parent_run_id=${run.id}&step_id=each&status=failed`)).body).toMatchObject({ data: [], meta: { total: 0 } });
    expect((await list(`parent_run_id=${run.id}&step_id=nothing_here`)).body).toMatchObject({ data: [], meta: { total: 0 } });
  });

  it("pages by number and by cursor in that order, both ways", async () => {
    const q = `parent_run_id=${run.id}&step_id=each`;
    expect(indexes(await list(`${q}&page=2&per_page=5`))).toEqual([5, 6, 7, 8, 9]);
    const first = await list(`${q}&limit=5`);
    expect([indexes(first), first.body.meta]).toEqual([[0, 1, 2, 3, 4], { total: 12, limit: 5, has_more: true }]);
    const second = await list(`${q}&limit=5&starting_after=${first.body.data[4].id}`);
    expect([indexes(second), second.body.meta.has_more]).toEqual([[5, 6, 7, 8, 9], true]);
    const third = await list(`${q}&limit=5&starting_after=${second.body.data[4].id}`);
    expect([indexes(third), third.body.meta.has_more]).toEqual([[10, 11], false]);
    const back = await list(`${q}&limit=5&ending_before=${third.body.data[0].id}`);
    expect([indexes(back), back.body.meta.has_more]).toEqual([[5, 6, 7, 8, 9], true]);
    const start = await list(`${q}&limit=5&ending_before=${second.body.data[0].id}`);
    expect([indexes(start), start.body.meta.has_more]).toEqual([[0, 1, 2, 3, 4], false]);
  });

  it("lists each item's newest run first when a retry ran an item again", async () => {
    const flaky = await create([
      {
        id: "each",
        type: "map",
        items: "{{ input.list }}",
        max_concurrency: 1,
        steps: [{ id: "gate", type: "stop", status: "failed", if: "input.item == 'bad'" }],
      },
    ]);
    // The item after the failed one never starts (no failure tolerated, one at a time).
    const id = await start(flaky, { list: ["a", "bad", "c"] });
    expect((await ended(flaky, id)).status).toBe("failed");
    expect((await call("POST", `/workflows/${flaky}/runs/${id}/retry`)).status).toBe(200);
    await waitFor("the retried item's second run to end", async () => {
      const res = await list(`parent_run_id=${id}&step_id=each`);
      return res.body.data.filter((r: any) => r.parent.index === 1 && r.status === "failed").length === 2;
    });
    const res = await list(`parent_run_id=${id}&step_id=each`);
    expect(indexes(res)).toEqual([0, 1, 1]);
    const [first, again, once] = res.body.data.map((r: any) => r.id);
    expect(again > once).toBe(true);
    // A cursor inside an item goes on with its older run; one before it, with its newer.
    const q = `parent_run_id=${id}&step_id=each&limit=1`;
    expect((await list(`${q}&starting_after=${first}`)).body).toMatchObject({ data: [{ id: again }], meta: { has_more: true } });
    expect((await list(`${q}&starting_after=${again}`)).body).toMatchObject({ data: [{ id: once }], meta: { has_more: false } });
    expect((await list(`${q}&ending_before=${once}`)).body).toMatchObject({ data: [{ id: again }], meta: { has_more: true } });
  });

  it("shows another organization's run's children to no one else", async () => {
    const res = await api(suite.p.baseUrl, "GET", `/runs?parent_run_id=${run.id}&step_id=each`, { key: suite.globex.live });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ data: [], meta: { total: 0 } });
    const cursor = (await list(`parent_run_id=${run.id}&step_id=each&limit=1`)).body.data[0].id;
    const theirs = await api(suite.p.baseUrl, "GET", `/runs?parent_run_id=${run.id}&step_id=each&limit=2&starting_after=${cursor}`, {
      key: suite.globex.live,
    });
    expectError(theirs, 400, "parameter_invalid", "starting_after");
  });

  it("refuses step_id without parent_run_id, and a cursor from another list, naming the parameter", async () => {
    expectError(await list("step_id=each"), 400, "parameter_invalid", "step_id");
    expectError(await list("step_id=each&status=running&limit=3"), 400, "parameter_invalid", "step_id");
    const other = (await list(`parent_run_id=${run.id}&step_id=after&limit=1`)).body.data[0].id;
    expectError(
      await list(`parent_run_id=${run.id}&step_id=each&limit=2&starting_after=${other}`),
      400,
      "parameter_invalid",
      "starting_after",
    );
    expectError(
      await list(`parent_run_id=${run.id}&step_id=each&limit=2&ending_before=${run.id}`),
      400,
      "parameter_invalid",
      "ending_before",
    );
  });

  it("refuses a step_id that is not a step id with 400 naming it, with or without parent_run_id", async () => {
    const notStepId = fc.oneof(
      fc.string({ maxLength: 60 }).filter((s) => !/^[a-z][a-z0-9_]{0,49}$/.test(s)),
      fc.stringMatching(/^[a-z][a-z0-9_]{50,60}$/),
      fc.stringMatching(/^[A-Z0-9_][a-z0-9_]{0,10}$/),
    );
    await fc.assert(
      fc.asyncProperty(notStepId, fc.boolean(), async (bad, withParent) => {
        const res = await list(`${withParent ? `parent_run_id=${run.id}&` : ""}step_id=${encodeURIComponent(bad)}`);
        expectError(res, 400, "parameter_invalid", "step_id");
      }),
      { numRuns: 60 },
    );
    // Sent twice it is a list, not a step id.
    expectError(await list(`parent_run_id=${run.id}&step_id=each&step_id=after`), 400, "parameter_invalid", "step_id");
  });
});
