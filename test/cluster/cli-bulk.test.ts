import { cliRun } from "../../tools/procs";
import { waitFor, type NodeProc, startCliServer } from "../helpers/cluster";
import { api } from "../helpers/platform";

/** The CLI as a process against a server process: rerun from a step, and bulk jobs on runs. */
jest.setTimeout(120_000);

const jsonLines = (stdout: string): any[] =>
  stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

let dir: { path: string; remove(): void };
let server: NodeProc;
let gw: string;
let env: Record<string, string>;
let key: string;

beforeAll(async () => {
  ({ dir, server, gw, key, env } = await startCliServer("cli-bulk", "Bulk", { RATE_LIMIT_MAX: "1000000" }));
});

afterAll(async () => {
  await server?.kill();
  dir?.remove();
});

async function workflow(steps: unknown[]) {
  const res = await api(gw, "POST", "/workflows", { key, body: { name: "cli", trigger: { type: "manual" }, steps } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
const runOf = (wf: string, run: string) => JSON.parse(cliRun(["runs", "get", wf, run, "--json"], env).stdout);

describe("runs rerun and runs bulk", () => {
  it("runs rerun --from-step --input: the steps before it copied, the rest run with the new input", async () => {
    const wf = await workflow([
      { id: "first", type: "set", output: { at: "{{ run.id }}" } },
      { id: "second", type: "set", output: { order: "{{ input.order }}" } },
    ]);
    const run = JSON.parse(cliRun(["workflows", "run", wf, "--input", '{"order":"o-1"}', "--json"], env).stdout);
    await waitFor("the run to succeed", () => runOf(wf, run.id).status === "succeeded");
    const rerun = cliRun(["runs", "rerun", wf, run.id, "--from-step", "second", "--input", '{"order":"o-2"}', "--json"], env);
    expect(rerun.status).toBe(0);
    const again = JSON.parse(rerun.stdout);
    expect(again).toMatchObject({ rerun_of: run.id, input: { order: "o-2" } });
    await waitFor("the rerun to succeed", () => runOf(wf, again.id).status === "succeeded");
    const done = runOf(wf, again.id);
    expect(done.steps[0]).toMatchObject({ copied_from: run.id, output: { at: run.id } });
    expect(done.steps[1].output).toEqual({ order: "o-2" });
    const human = cliRun(["runs", "get", wf, again.id], env).stdout;
    expect(human).toContain(`first  set  succeeded (copied from ${run.id})`);
    // A step the workflow lacks: the API's error, exit 1.
    const refused = cliRun(["runs", "rerun", wf, run.id, "--from-step", "nope"], env);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("no step 'nope'");
  });

  it("runs list and runs get say why a queued run waits, and its key", async () => {
    const res = await api(gw, "POST", "/workflows", {
      key,
      body: {
        name: "one at a time",
        trigger: { type: "manual" },
        concurrency: { limit: 1, key: "{{ input.customer }}" },
        steps: [{ id: "gate", type: "approval" }],
      },
    });
    expect(res.status).toBe(201);
    const wf = res.body.data.id as string;
    const start = async () => (await api(gw, "POST", `/workflows/${wf}/runs`, { key, body: { input: { customer: "cus_42" } } })).body.data;
    const first = await start();
    await waitFor("the first run to wait", async () => runOf(wf, first.id).status === "waiting");
    const second = await start();
    expect(second.status).toBe("queued");
    const human = cliRun(["runs", "get", wf, second.id], env).stdout;
    expect(human.split("\n")[0]).toMatch(new RegExp(`^${second.id} {2}queued \\(concurrency, key cus_42\\) {2}workflow ${wf} v1`));
    const rows = cliRun(["runs", "list", "--workflow", wf], env).stdout.trimEnd().split("\n");
    expect(rows).toHaveLength(3);
    expect(rows[1]).toMatch(new RegExp(`^${second.id} +${wf} +queued \\(concurrency\\) `));
    expect(rows[2]).toMatch(new RegExp(`^${first.id} +${wf} +waiting `));
    // Cancelling the first lets the second go.
    expect(cliRun(["runs", "cancel", wf, first.id], env).status).toBe(0);
    await waitFor("the second run to start", async () => runOf(wf, second.id).status === "waiting");
  });

  it("runs bulk cancel --wait, runs bulk-get, bulk-list and bulk-cancel", async () => {
    const wf = await workflow([{ id: "gate", type: "approval" }]);
    for (let i = 0; i < 60; i++) expect((await api(gw, "POST", `/workflows/${wf}/runs`, { key, body: {} })).status).toBe(201);
    await waitFor(
      "60 runs waiting",
      async () => (await api(gw, "GET", `/workflows/${wf}/runs?status=waiting&per_page=1`, { key })).body.meta.total === 60,
    );
    const human = cliRun(["runs", "bulk", "cancel", "--workflow", wf, "--wait"], env);
    expect(human.status).toBe(0);
    expect(human.stdout).toMatch(/^blk_\w+ {2}cancel {2}succeeded {2}workflow_id=wf_\w+\nmatched 60 of about 60: 60 done, 0 failed\n$/);
    const id = human.stdout.split(" ")[0];
    const got = jsonLines(cliRun(["runs", "bulk-get", id, "--json"], env).stdout);
    expect(got).toEqual([expect.objectContaining({ object: "bulk_job", id, status: "succeeded", matched: 60, done: 60, failed: 0 })]);
    // Ended already: a conflict, exit 1.
    expect(cliRun(["runs", "bulk-cancel", id], env).status).toBe(1);
    // A filter that cannot be bounded, and an action that does not exist.
    const unbounded = cliRun(["runs", "bulk", "retry"], env);
    expect(unbounded.status).toBe(1);
    expect(unbounded.stderr).toContain("workflow_id or a creation time range");
    expect(cliRun(["runs", "bulk", "delete", "--workflow", wf], env).status).toBe(2);
    // A tenant's text in the filter is shown escaped; --json has it exactly.
    const hostile = "gate\u001b[2K\u202eevil";
    const shown = cliRun(["runs", "bulk", "rerun", "--workflow", wf, "--failed-step", hostile, "--wait"], env);
    expect(shown.status).toBe(0);
    expect(shown.stdout).toContain("failed_step=gate\\x1B[2K\\u202Eevil");
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    expect(/[\u001b\u202e]/u.test(shown.stdout)).toBe(false);
    const [listed] = jsonLines(cliRun(["runs", "bulk-get", shown.stdout.split(" ")[0], "--json"], env).stdout);
    expect(listed.filter.failed_step).toBe(hostile);
    // Both jobs, newest first; a table for people.
    expect(jsonLines(cliRun(["runs", "bulk-list", "--json"], env).stdout).map((j) => j.id)).toEqual([listed.id, id]);
    const table = cliRun(["runs", "bulk-list", "--limit", "1"], env).stdout.trimEnd().split("\n");
    expect(table).toEqual([
      expect.stringMatching(/^id +action +status +matched +done +failed +created_at$/),
      expect.stringContaining(listed.id),
    ]);
  });
});
