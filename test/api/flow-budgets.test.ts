import { manualClock } from "../helpers/clock";
import { api, expectError, usePlatform } from "../helpers/platform";
import { acmeRuns } from "../helpers/steps";

/**
 * RUN_STARTS_PER_MINUTE queues a run already accepted (an inbound request's) instead of refusing it;
 * an API start is still refused. The budget counts per clock minute: the suite's clock stands 200 ms
 * before a minute ends and moves only when the test moves it.
 */
const clock = manualClock(Date.UTC(2026, 10, 26, 12, 0, 59, 800));
const suite = usePlatform({ RUN_STARTS_PER_MINUTE: "2", RATE_LIMIT_MAX: "100000" }, { clock });
const { call, workflow, ended } = acmeRuns(suite);

describe("the start budget and accepted runs", () => {
  it("holds an inbound request's run queued over the budget, and starts it in the next minute", async () => {
    const created = await call("POST", "/workflows", {
      name: "inbound",
      trigger: { type: "webhook", verify: { scheme: "none" } },
      steps: [{ id: "echo", type: "set", output: "{{ input.request.body.n }}" }],
    });
    expect(created.status).toBe(201);
    const wf = created.body.data;
    const ids: string[] = [];
    for (let n = 0; n < 4; n += 1) {
      const res = await api(suite.p.baseUrl, "POST", wf.hook.url.replace(/^\/v1/, ""), {
        raw: JSON.stringify({ n }),
        headers: { "content-type": "application/json" },
      });
      expect(res.status).toBe(202);
      ids.push(res.body.data.run_id);
    }
    for (const id of ids.slice(0, 2)) expect((await ended(wf.id, id)).status).toBe("succeeded");
    for (const id of ids.slice(2)) {
      const run = (await call("GET", `/workflows/${wf.id}/runs/${id}`)).body.data;
      expect(run).toMatchObject({ status: "queued", queued_reason: "start_budget" });
    }
    // An API start is still refused.
    const other = await workflow([{ id: "x", type: "set", output: 1 }]);
    expectError(await call("POST", `/workflows/${other.id}/runs`, {}), 429, "rate_limited");
    clock.advance(1_000);
    const later = await Promise.all(ids.slice(2).map((id) => ended(wf.id, id)));
    expect(later.map((r) => [r.status, r.output])).toEqual([
      ["succeeded", 2],
      ["succeeded", 3],
    ]);
  });
});
