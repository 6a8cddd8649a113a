import fc from "fast-check";
import { bulkFilterText, bulkProgress, QUEUED_REASONS, waitText } from "../../../dashboard/src/pages/runs/runs.logic";
import { recentTicks, tickText } from "../../../dashboard/src/pages/workflows/schedule-ticks.logic";
import { requestText } from "../../../dashboard/src/pages/workflows/hook-requests.logic";
import type { BulkJob, Run, Schedule } from "../../../shared/api/wire";

const iso = (minute: number) => new Date(Date.UTC(2026, 10, 27, 12, minute)).toISOString();
const schedule = (recent: Schedule["recent"]): Schedule => ({
  object: "schedule",
  workflow_id: "wf_1",
  next_run_at: iso(30),
  upcoming: [iso(30)],
  buffered_at: null,
  last_run_id: null,
  missed_count: 0,
  skipped_count: 0,
  recent,
});
const run = (id: string, trigger: Run["trigger"], status: Run["status"] = "succeeded") => ({ id, status, trigger }) as Run;

describe("recentTicks", () => {
  it("puts the runs a schedule started and the ticks it missed or skipped in one list, newest tick first", () => {
    const rows = recentTicks(
      schedule([
        { outcome: "skipped", scheduled_at: iso(8), recorded_at: iso(8) },
        { outcome: "missed", scheduled_at: iso(0), last_scheduled_at: iso(5), ticks: 6, recorded_at: iso(9) },
      ]),
      [
        run("run_3", { type: "schedule", scheduled_at: iso(9), source: "tick" }, "running"),
        run("run_2", { type: "manual" }),
        run("run_1", { type: "schedule", scheduled_at: iso(6), source: "tick" }),
      ],
    );
    expect(rows.map((r) => [r.outcome, r.scheduled_at, r.last_scheduled_at, r.ticks, r.run?.id])).toEqual([
      ["started", iso(9), iso(9), 1, "run_3"],
      ["skipped", iso(8), iso(8), 1, undefined],
      ["started", iso(6), iso(6), 1, "run_1"],
      ["missed", iso(0), iso(5), 6, undefined],
    ]);
    expect(rows.map(tickText)).toEqual([
      "started",
      "skipped: the run before it had not ended (overlap)",
      "started",
      "missed: 6 ticks, older than the catch-up window when the platform saw them",
    ]);
  });

  it("answers at most `max` rows, ordered, whatever it is given", () => {
    const tick = fc.integer({ min: 0, max: 59 }).map(iso);
    fc.assert(
      fc.property(fc.array(tick, { maxLength: 30 }), fc.array(tick, { maxLength: 30 }), (started, skipped) => {
        const rows = recentTicks(
          schedule(skipped.map((at) => ({ outcome: "skipped" as const, scheduled_at: at, recorded_at: at }))),
          started.map((at, i) => run(`run_${i}`, { type: "schedule", scheduled_at: at, source: "backfill" })),
        );
        expect(rows.length).toBe(Math.min(20, started.length + skipped.length));
        expect(rows.map((r) => r.scheduled_at)).toEqual([...rows.map((r) => r.scheduled_at)].sort().reverse());
      }),
    );
  });
});

describe("waitText", () => {
  it("says why a queued run waits, and nothing for a run that does not", () => {
    expect(waitText({ status: "queued", queued_reason: "concurrency" })).toBe(QUEUED_REASONS.concurrency);
    expect(waitText({ status: "queued", queued_reason: "start_budget" })).toMatch(/runs per minute/);
    expect(waitText({ status: "queued", queued_reason: null })).toBe("about to start");
    expect(waitText({ status: "running", queued_reason: null })).toBeNull();
  });
});

describe("bulk jobs", () => {
  const job = (over: Partial<BulkJob>) => ({ status: "running", total: 10, matched: 4, done: 3, failed: 1, ...over }) as BulkJob;
  it("shows progress as the runs handled of those in range, full once it succeeded", () => {
    expect(bulkProgress(job({}))).toEqual({ value: 4, max: 10, text: "4 matched of 10 in range · 3 done · 1 failed" });
    expect(bulkProgress(job({ status: "succeeded", matched: 6, done: 6, failed: 0 })).value).toBe(10);
    expect(bulkProgress(job({ total: 10000, total_capped: true })).text).toMatch(/of 10000\+ in range/);
    expect(bulkProgress(job({ total: 0, matched: 0, done: 0, failed: 0 }))).toMatchObject({ value: 0, max: 1 });
  });
  it("writes a filter in a line", () => {
    expect(bulkFilterText({ workflow_id: "wf_1", status: "failed", failed_step: "pay" })).toBe(
      "workflow wf_1 · failed · failed at step pay",
    );
    expect(bulkFilterText({ created_after: "2026-11-27T00:00:00Z" })).toBe("from 2026-11-27T00:00:00Z");
  });
});

describe("requestText", () => {
  it("says what became of a hook's request", () => {
    expect(requestText({ outcome: "refused", reason: "bad_signature" })).toMatch(/^bad_signature: the signature does not match/);
    expect(requestText({ outcome: "duplicate", reason: null })).toMatch(/first run/);
    expect(requestText({ outcome: "filtered", reason: null })).toMatch(/no run/);
  });
});
