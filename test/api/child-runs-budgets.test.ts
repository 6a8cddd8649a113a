import { waitFor } from "../../tools/procs";
import { manualClock } from "../helpers/clock";
import { expectError, usePlatform } from "../helpers/platform";
import { acmeRuns } from "../helpers/steps";

/**
 * Child runs count against RUN_STARTS_PER_MINUTE like any run. The budget counts per clock minute:
 * the suite's clock stands 200 ms before a minute ends and moves only when the test moves it.
 */
const clock = manualClock(Date.UTC(2026, 10, 26, 12, 0, 59, 800));
const suite = usePlatform({ RUN_STARTS_PER_MINUTE: "3", RATE_LIMIT_MAX: "100000" }, { clock });
const { call, workflow, start, ended } = acmeRuns(suite);

describe("a child run and the start budget", () => {
  it("counts as a start; when the minute's starts are spent, the step starts it in the next minute", async () => {
    const leaf = await workflow([{ id: "x", type: "set", output: 1 }]);
    const parent = await workflow([{ id: "call", type: "run_workflow", workflow_id: leaf.id }]);
    // The parent and its child: two starts of three.
    const first = await ended(parent.id, await start(parent.id));
    expect(first.status).toBe("succeeded");
    const second = await start(parent.id);
    expectError(await call("POST", `/workflows/${leaf.id}/runs`, {}), 429, "rate_limited");
    // The second parent's child finds the minute spent: the parent is written again (due as the minute ends), childless.
    await waitFor("the child's start to be put off", async () => {
      const run = (await call("GET", `/workflows/${parent.id}/runs/${second}`)).body.data;
      return run.updated_at > run.created_at && run.steps[0].status === "pending";
    });
    expect((await call("GET", `/runs?parent_run_id=${second}`)).body.data).toEqual([]);
    clock.advance(1_000);
    const done = await ended(parent.id, second);
    expect(done.status).toBe("succeeded");
    const children = (await call("GET", `/runs?parent_run_id=${second}`)).body.data;
    expect(children).toHaveLength(1);
    expect(done.steps[0].output.run_id).toBe(children[0].id);
  });
});
