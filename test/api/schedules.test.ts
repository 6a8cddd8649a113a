import { waitFor } from "../../tools/procs";
import { manualClock } from "../helpers/clock";
import { api, expectError, usePlatform } from "../helpers/platform";

// The schedules read the suite's clock: it stands 10 s past a minute, and only the tests move it.
const clock = manualClock(Date.UTC(2026, 10, 26, 12, 0, 10));
const suite = usePlatform({}, { clock });
const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
/** The first whole minute after the clock's time. */
const nextMinute = () => Math.floor(clock.now() / MINUTE) * MINUTE + MINUTE;

const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

const noted = [{ id: "noted", type: "set", output: { label: "{{ input.label }}" } }];
const waits = [{ id: "hold", type: "approval", message: "hold the schedule" }];

const made: string[] = [];
afterEach(async () => {
  // Deleted: their schedules stop, so the next test's clock moves tick only its own.
  for (const id of made.splice(0)) await call("DELETE", `/workflows/${id}`);
});

async function scheduled(trigger: Record<string, unknown>, steps: unknown[] = noted) {
  const res = await call("POST", "/workflows", { name: "scheduled", trigger: { type: "schedule", ...trigger }, steps });
  expect(res.status).toBe(201);
  made.push(res.body.data.id);
  return res.body.data as { id: string; next_run_at: string | null; trigger: Record<string, unknown> };
}

interface RunSeen {
  id: string;
  status: string;
  input: Record<string, unknown>;
  trigger: { type: string; scheduled_at?: string; source?: string };
}
async function runsOf(id: string): Promise<RunSeen[]> {
  const res = await call("GET", `/workflows/${id}/runs?limit=100`);
  expect(res.status).toBe(200);
  return (res.body.data as RunSeen[]).reverse();
}
const ticksOf = async (id: string) => (await runsOf(id)).map((r) => r.trigger.scheduled_at);
async function scheduleOf(id: string) {
  const res = await call("GET", `/workflows/${id}/schedule`);
  expect(res.status).toBe(200);
  return res.body.data;
}
async function untilRuns(id: string, n: number): Promise<RunSeen[]> {
  await waitFor(`${n} runs of ${id}`, async () => (await runsOf(id)).length >= n);
  return runsOf(id);
}
async function approveAll(id: string) {
  for (const run of await runsOf(id)) {
    await waitFor(
      `run ${run.id} waiting`,
      async () => (await call("GET", `/workflows/${id}/runs/${run.id}`)).body.data.status !== "queued",
    );
    const res = await call("POST", `/workflows/${id}/runs/${run.id}/approve`);
    expect([200, 409]).toContain(res.status);
  }
}

describe("schedule triggers, checked when written", () => {
  it.each([
    [{ cron: "0 25 * * *" }, "trigger.cron"],
    [{ cron: "0 8 * * 1-5", timezone: "Europe/Atlantis" }, "trigger.timezone"],
    [{ every_ms: 10 }, "trigger.every_ms"],
    [{ every_ms: 1000, overlap: "later" }, "trigger.overlap"],
    [{ every_ms: 1000, catchup_window_ms: -1 }, "trigger.catchup_window_ms"],
  ])("refuses %j with a 400 naming %s", async (trigger, param) => {
    const res = await call("POST", "/workflows", { name: "bad", trigger: { type: "schedule", ...trigger }, steps: noted });
    expectError(res, 400, "parameter_invalid", param);
    expect(res.body.error.message).toContain(param);
  });

  it("answers the trigger with its defaults and the workflow with its next tick", async () => {
    const wf = await scheduled({ cron: "0 8 * * 1-5", timezone: "Europe/Berlin" });
    expect(wf.trigger).toEqual({
      type: "schedule",
      cron: "0 8 * * 1-5",
      timezone: "Europe/Berlin",
      overlap: "skip",
      input: {},
      catchup_window_ms: 3_600_000,
    });
    // Thursday 26 November 2026, 12:00 UTC: the next 08:00 in Berlin is Friday's, 07:00 UTC.
    expect(wf.next_run_at).toBe("2026-11-27T07:00:00.000Z");
    const schedule = await scheduleOf(wf.id);
    expect(schedule.upcoming).toEqual([
      "2026-11-27T07:00:00.000Z",
      "2026-11-30T07:00:00.000Z",
      "2026-12-01T07:00:00.000Z",
      "2026-12-02T07:00:00.000Z",
      "2026-12-03T07:00:00.000Z",
    ]);
  });
});

describe("ticks", () => {
  it("start one run per tick, with the schedule's input and the tick's time", async () => {
    const wf = await scheduled({ every_ms: MINUTE, input: { label: "hourly report" } });
    const first = nextMinute();
    expect(wf.next_run_at).toBe(iso(first));
    clock.set(first);
    const [run] = await untilRuns(wf.id, 1);
    expect(run.trigger).toEqual({ type: "schedule", scheduled_at: iso(first), source: "tick" });
    expect(run.input).toEqual({ label: "hourly report" });
    await waitFor("the run to succeed", async () => (await runsOf(wf.id))[0].status === "succeeded");
    expect((await call("GET", `/workflows/${wf.id}`)).body.data.next_run_at).toBe(iso(first + MINUTE));
    clock.advance(MINUTE + 500);
    await untilRuns(wf.id, 2);
    expect(await ticksOf(wf.id)).toEqual([iso(first), iso(first + MINUTE)]);
  });

  it("skip: a tick while the previous scheduled run has not ended starts nothing and is recorded", async () => {
    const wf = await scheduled({ every_ms: MINUTE, overlap: "skip" }, waits);
    const first = nextMinute();
    clock.set(first);
    await untilRuns(wf.id, 1);
    clock.advance(MINUTE);
    await waitFor("the skipped tick", async () => (await scheduleOf(wf.id)).skipped_count === 1);
    const schedule = await scheduleOf(wf.id);
    expect(schedule.recent[0]).toMatchObject({ outcome: "skipped", scheduled_at: iso(first + MINUTE) });
    expect(await ticksOf(wf.id)).toEqual([iso(first)]);
    await approveAll(wf.id);
    await waitFor("the first run to end", async () => (await runsOf(wf.id))[0].status === "succeeded");
    clock.advance(MINUTE);
    await untilRuns(wf.id, 2);
    expect(await ticksOf(wf.id)).toEqual([iso(first), iso(first + 2 * MINUTE)]);
  });

  it("buffer_one: keeps one tick until the previous run ends, skips the others, then starts it", async () => {
    const wf = await scheduled({ every_ms: MINUTE, overlap: "buffer_one" }, waits);
    const first = nextMinute();
    clock.set(first);
    await untilRuns(wf.id, 1);
    clock.advance(MINUTE);
    await waitFor("the buffered tick", async () => (await scheduleOf(wf.id)).buffered_at === iso(first + MINUTE));
    clock.advance(MINUTE);
    await waitFor("the skipped tick", async () => (await scheduleOf(wf.id)).skipped_count === 1);
    expect((await scheduleOf(wf.id)).recent[0]).toMatchObject({ outcome: "skipped", scheduled_at: iso(first + 2 * MINUTE) });
    await approveAll(wf.id);
    await waitFor("the first run to end", async () => (await runsOf(wf.id))[0].status === "succeeded");
    // A buffered tick looks at the run before it every second of the schedule's clock.
    clock.advance(1000);
    await untilRuns(wf.id, 2);
    expect(await ticksOf(wf.id)).toEqual([iso(first), iso(first + MINUTE)]);
    expect((await scheduleOf(wf.id)).buffered_at).toBeNull();
  });

  it("allow: starts every tick while earlier runs still wait", async () => {
    const wf = await scheduled({ every_ms: MINUTE, overlap: "allow" }, waits);
    const first = nextMinute();
    clock.set(first + 2 * MINUTE);
    await untilRuns(wf.id, 3);
    expect(await ticksOf(wf.id)).toEqual([iso(first), iso(first + MINUTE), iso(first + 2 * MINUTE)]);
    expect((await scheduleOf(wf.id)).skipped_count).toBe(0);
  });

  it("starts late the ticks missed within the catch-up window, once each, and records older ones as missed", async () => {
    const wf = await scheduled({ every_ms: MINUTE, overlap: "allow", catchup_window_ms: 3 * MINUTE + 30_000 });
    const first = nextMinute();
    // Nothing ran for ten minutes: ticks first … first+9 min are due, the window reaches back 3.5 min.
    clock.set(first + 9 * MINUTE);
    await untilRuns(wf.id, 4);
    expect(await ticksOf(wf.id)).toEqual([6, 7, 8, 9].map((m) => iso(first + m * MINUTE)));
    const schedule = await scheduleOf(wf.id);
    expect(schedule.missed_count).toBe(6);
    expect(schedule.recent).toEqual([
      {
        outcome: "missed",
        scheduled_at: iso(first),
        last_scheduled_at: iso(first + 5 * MINUTE),
        ticks: 6,
        recorded_at: iso(first + 9 * MINUTE),
      },
    ]);
    expect(schedule.next_run_at).toBe(iso(first + 10 * MINUTE));
  });
});

describe("POST /workflows/{id}/schedule/trigger", () => {
  it("starts a run now with the schedule's input, and leaves the schedule as it was", async () => {
    const wf = await scheduled({ every_ms: 3_600_000, input: { label: "now" } });
    const res = await call("POST", `/workflows/${wf.id}/schedule/trigger`);
    expect(res.status).toBe(201);
    expect(res.body.data.trigger).toEqual({ type: "schedule", scheduled_at: iso(clock.now()), source: "trigger" });
    expect(res.body.data.input).toEqual({ label: "now" });
    expect((await scheduleOf(wf.id)).next_run_at).toBe(wf.next_run_at);
  });

  it("refuses a workflow without a schedule, and an inactive one, with 409 (a GET of its schedule: 404)", async () => {
    const manual = await call("POST", "/workflows", { name: "manual", trigger: { type: "manual" }, steps: noted });
    made.push(manual.body.data.id);
    expectError(await call("POST", `/workflows/${manual.body.data.id}/schedule/trigger`), 409, "invalid_state", "id");
    expectError(await call("GET", `/workflows/${manual.body.data.id}/schedule`), 404, "resource_not_found", "id");
    const wf = await scheduled({ every_ms: MINUTE });
    await call("PATCH", `/workflows/${wf.id}`, { status: "inactive" });
    expectError(await call("POST", `/workflows/${wf.id}/schedule/trigger`), 409, "invalid_state", "id");
    expectError(await call("POST", "/workflows/wf_00000000000000000000000000/schedule/trigger"), 404, "resource_not_found");
  });

  it("needs workflows:write", async () => {
    const key = await call("POST", "/api-keys", { name: "reader", scopes: ["workflows:read"] });
    const wf = await scheduled({ every_ms: MINUTE });
    expectError(await call("POST", `/workflows/${wf.id}/schedule/trigger`, undefined, key.body.data.key), 403, "insufficient_scope");
    expect((await call("GET", `/workflows/${wf.id}/schedule`, undefined, key.body.data.key)).status).toBe(200);
  });
});

describe("POST /workflows/{id}/schedule/backfill", () => {
  it("starts a run for each past tick of the range that has none; sent again, it starts nothing more", async () => {
    const wf = await scheduled({ every_ms: MINUTE, input: { label: "backfilled" } });
    const to = Math.floor(clock.now() / MINUTE) * MINUTE;
    const from = to - 5 * MINUTE;
    const res = await call("POST", `/workflows/${wf.id}/schedule/backfill`, { from: iso(from), to: iso(to) });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ object: "schedule_backfill", ticks: 5, already_started: [] });
    expect(res.body.data.started.map((s: { scheduled_at: string }) => s.scheduled_at)).toEqual(
      [0, 1, 2, 3, 4].map((m) => iso(from + m * MINUTE)),
    );
    const runs = await untilRuns(wf.id, 5);
    expect(runs.every((r) => r.trigger.source === "backfill" && r.input.label === "backfilled")).toBe(true);
    const again = await call("POST", `/workflows/${wf.id}/schedule/backfill`, { from: iso(from - MINUTE), to: iso(to) });
    expect(again.body.data.started.map((s: { scheduled_at: string }) => s.scheduled_at)).toEqual([iso(from - MINUTE)]);
    expect(again.body.data.already_started).toHaveLength(5);
    expect(await runsOf(wf.id)).toHaveLength(6);
  });

  it.each([
    ["a range of more than 100 ticks", (now: number) => ({ from: iso(now - 101 * MINUTE - 1), to: iso(now) }), "to", /more than 100 ticks/],
    ["a range reaching past now", (now: number) => ({ from: iso(now - MINUTE), to: iso(now + MINUTE) }), "to", /not be after now/],
    ["an empty range", (now: number) => ({ from: iso(now - MINUTE), to: iso(now - MINUTE) }), "to", /after from/],
    ["a time that is not ISO 8601", () => ({ from: "yesterday", to: iso(Date.now()) }), "from", /ISO 8601/],
  ])("refuses %s with a 400", async (_what, range, param, message) => {
    const wf = await scheduled({ every_ms: MINUTE });
    const res = await call("POST", `/workflows/${wf.id}/schedule/backfill`, range(clock.now()));
    expectError(res, 400, "parameter_invalid", param);
    expect(res.body.error.message).toMatch(message);
    expect(await runsOf(wf.id)).toHaveLength(0);
  });
});

describe("deactivating and changing a schedule", () => {
  it("an inactive workflow ticks nothing and records nothing missed; activated again, it ticks from then on", async () => {
    const wf = await scheduled({ every_ms: MINUTE });
    const witness = await scheduled({ every_ms: MINUTE, overlap: "allow" });
    const off = await call("PATCH", `/workflows/${wf.id}`, { status: "inactive" });
    expect(off.body.data.next_run_at).toBeNull();
    const first = nextMinute();
    clock.set(first + MINUTE);
    // The witness ticks at the same times: once its runs are there, the inactive one has had its chance.
    await untilRuns(witness.id, 2);
    expect(await runsOf(wf.id)).toHaveLength(0);
    const on = await call("PATCH", `/workflows/${wf.id}`, { status: "active" });
    expect(on.body.data.next_run_at).toBe(iso(first + 2 * MINUTE));
    expect((await scheduleOf(wf.id)).missed_count).toBe(0);
    clock.advance(MINUTE);
    expect((await untilRuns(wf.id, 1))[0].trigger.scheduled_at).toBe(iso(first + 2 * MINUTE));
  });

  it("a new trigger reschedules from now", async () => {
    const wf = await scheduled({ every_ms: MINUTE });
    const res = await call("PATCH", `/workflows/${wf.id}`, {
      trigger: { type: "schedule", cron: "30 6 * * *", timezone: "America/New_York" },
    });
    expect(res.status).toBe(200);
    // 06:30 in New York in November (UTC-5) is 11:30 UTC: today's is past, so tomorrow's.
    const day = new Date(clock.now()).toISOString().slice(0, 10);
    const tomorrow = new Date(Date.parse(`${day}T11:30:00Z`) + (Date.parse(`${day}T11:30:00Z`) > clock.now() ? 0 : 86_400_000));
    expect(res.body.data.next_run_at).toBe(tomorrow.toISOString());
    const manual = await call("PATCH", `/workflows/${wf.id}`, { trigger: { type: "manual" } });
    expect(manual.body.data.next_run_at).toBeUndefined();
    // Past the tick it would have had: another schedule's run is the witness that ticks were looked at.
    const witness = await scheduled({ every_ms: MINUTE, overlap: "allow" });
    clock.set(Date.parse(tomorrow.toISOString()) + MINUTE);
    await untilRuns(witness.id, 1);
    expect(await runsOf(wf.id)).toHaveLength(0);
  });
});
