import { cliRun } from "../../tools/procs";
import { waitFor, type NodeProc, startCliServer } from "../helpers/cluster";
import { api } from "../helpers/platform";

/** The CLI as a process against a server process: a scheduled workflow's ticks, a run now, and a backfill. */
jest.setTimeout(120_000);

const DAY = 24 * 60 * 60 * 1000;
const ISO = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z/.source;

let dir: { path: string; remove(): void };
let server: NodeProc;
let gw: string;
let env: Record<string, string>;
let key: string;

beforeAll(async () => {
  ({ dir, server, gw, key, env } = await startCliServer("cli-schedules", "Schedules", { RATE_LIMIT_MAX: "1000000" }));
});

afterAll(async () => {
  await server?.kill();
  dir?.remove();
});

const STEPS = [{ id: "noted", type: "set", output: { label: "{{ input.label }}" } }];
const runsOf = async (wf: string) => (await api(gw, "GET", `/workflows/${wf}/runs?limit=100`, { key })).body.data as any[];

describe("workflows schedule, trigger-schedule and backfill", () => {
  it("shows a daily cron's next ticks, starts a run now, and backfills each past tick once", async () => {
    const definition = {
      name: "Daily report",
      trigger: { type: "schedule", cron: "0 8 * * *", timezone: "Europe/Berlin", input: { label: "daily" } },
      steps: STEPS,
    };
    const created = cliRun(["workflows", "create", "--definition", JSON.stringify(definition)], env);
    expect(created.status).toBe(0);
    const wf = created.stdout.split(" ")[0];
    expect(created.stdout).toMatch(new RegExp(`\\nnext run: ${ISO}\\n$`));

    const shown = cliRun(["workflows", "schedule", wf], env);
    expect(shown.status).toBe(0);
    const lines = shown.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^${wf} {2}next run ${ISO}$`));
    const upcoming = lines[1].replace("upcoming: ", "").split(", ");
    expect(upcoming).toHaveLength(5);
    // Daily at 08:00 in Berlin: 07:00 or 06:00 UTC, a day apart (23 or 25 hours across a change of time).
    for (const [i, t] of upcoming.entries()) {
      expect(t).toMatch(/T0[67]:00:00(\.000)?Z$/);
      if (i > 0) expect([23, 24, 25]).toContain((Date.parse(t) - Date.parse(upcoming[i - 1])) / 3_600_000);
    }
    expect(lines[2]).toBe("missed 0, skipped 0; last run none");
    expect(JSON.parse(cliRun(["workflows", "schedule", wf, "--json"], env).stdout)).toMatchObject({ object: "schedule", workflow_id: wf });

    const now = cliRun(["workflows", "trigger-schedule", wf, "--json"], env);
    expect(now.status).toBe(0);
    const run = JSON.parse(now.stdout);
    expect(run).toMatchObject({ workflow_id: wf, input: { label: "daily" }, trigger: { type: "schedule", source: "trigger" } });

    // Three whole days before now hold exactly three daily ticks.
    const to = new Date(Date.now() - 60_000).toISOString();
    const from = new Date(Date.parse(to) - 3 * DAY).toISOString();
    const filled = cliRun(["workflows", "backfill", wf, "--from", from, "--to", to], env);
    expect(filled.status).toBe(0);
    const [head, ...started] = filled.stdout.trimEnd().split("\n");
    expect(head).toMatch(new RegExp(`^${wf} {2}\\[${ISO}, ${ISO}\\): 3 ticks, 3 started, 0 had a run$`));
    expect(started).toEqual(Array.from({ length: 3 }, () => expect.stringMatching(new RegExp(`^ {2}${ISO} {2}run_\\w+$`))));
    const again = cliRun(["workflows", "backfill", wf, "--from", from, "--to", to, "--json"], env);
    const repeated = JSON.parse(again.stdout);
    expect(repeated).toMatchObject({ ticks: 3, started: [] });
    expect(repeated.already_started).toHaveLength(3);
    await waitFor("four runs", async () => (await runsOf(wf)).length === 4);

    // Mistakes: a range ending in the future (the API's 400, exit 1), a missing option (exit 2).
    const future = cliRun(["workflows", "backfill", wf, "--from", from, "--to", new Date(Date.now() + DAY).toISOString()], env);
    expect(future.status).toBe(1);
    expect(future.stderr).toContain("400 parameter_invalid: to must not be after now");
    const missing = cliRun(["workflows", "backfill", wf, "--from", from], env);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("--to is required");
  });

  it("lists the ticks a busy schedule skipped, newest first", async () => {
    // A tick each second while the first run waits for an approval: the next ticks are skipped (real seconds are the subject).
    const res = await api(gw, "POST", "/workflows", {
      key,
      body: { name: "Busy", trigger: { type: "schedule", every_ms: 1000 }, steps: [{ id: "hold", type: "approval" }] },
    });
    expect(res.status).toBe(201);
    const wf = res.body.data.id as string;
    try {
      await waitFor(
        "two skipped ticks",
        async () => (await api(gw, "GET", `/workflows/${wf}/schedule`, { key })).body.data.skipped_count >= 2,
      );
      const lines = cliRun(["workflows", "schedule", wf], env).stdout.trimEnd().split("\n");
      expect(lines[2]).toMatch(/^missed 0, skipped \d+; last run run_\w+$/);
      const recent = lines.slice(3);
      expect(recent.length).toBeGreaterThanOrEqual(2);
      for (const line of recent) expect(line).toMatch(new RegExp(`^ {2}skipped {2}${ISO} {2}recorded ${ISO}$`));
      const ticks = recent.map((l) => Date.parse(l.split(/ +/)[2]));
      expect(ticks).toEqual([...ticks].sort((a, b) => b - a));
    } finally {
      await api(gw, "DELETE", `/workflows/${wf}`, { key });
    }
  });

  it("refuses a workflow without a schedule: the API's 404, exit 1", async () => {
    const res = await api(gw, "POST", "/workflows", { key, body: { name: "m", trigger: { type: "manual" }, steps: STEPS } });
    const got = cliRun(["workflows", "schedule", res.body.data.id], env);
    expect(got.status).toBe(1);
    expect(got.stderr).toContain('404 resource_not_found: The workflow\'s trigger is "manual": it has no schedule');
  });
});
