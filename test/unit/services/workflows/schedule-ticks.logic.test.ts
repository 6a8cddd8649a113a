import fc from "fast-check";
import type { ScheduleTrigger } from "../../../../shared/api/wire";
import { nextMove, RECENT_KEPT, scheduleOf, scheduleView, type ScheduleState } from "../../../../services/workflows/schedule-ticks.logic";
import { checkScheduleTrigger } from "../../../../services/workflows/schedule-trigger.logic";

const every = (ms: number, more: Record<string, unknown> = {}): ScheduleTrigger =>
  checkScheduleTrigger({ type: "schedule", every_ms: ms, catchup_window_ms: 60_000, ...more });

/** Moves the schedule as a node does until nothing is due: the ticks started, and the state left. */
function drive(state: ScheduleState, trigger: ScheduleTrigger, now: number, running: (s: ScheduleState) => boolean = () => false) {
  const started: number[] = [];
  for (let move = nextMove(state, trigger, now, running(state)); move; move = nextMove(state, trigger, now, running(state))) {
    if (move.start !== null) started.push(move.start);
    state = move.start !== null ? { ...move.next, last_run_id: `run_${move.start}` } : move.next;
  }
  return { started, state };
}

describe("a schedule's state", () => {
  it("starts at the first tick after now while active; an inactive workflow has no tick and is not due", () => {
    const trigger = every(1000);
    expect(scheduleOf(trigger, "active", 10_500)).toMatchObject({ next_at: 11_000, due_at: 11_000, rev: 1 });
    const idle = scheduleOf(trigger, "inactive", 10_500) as ScheduleState;
    expect(idle.next_at).toBeUndefined();
    expect(idle.due_at).toBeUndefined();
    expect(nextMove(idle, trigger, 1e12, false)).toBeNull();
    expect(scheduleOf({ type: "manual" }, "active", 0)).toBeUndefined();
  });

  it("keeps what its ticks recorded when rescheduled", () => {
    const before = { ...(scheduleOf(every(1000), "active", 0) as ScheduleState), missed_count: 3, skipped_count: 2 };
    expect(scheduleOf(every(5000), "active", 7000, before)).toMatchObject({ next_at: 10_000, missed_count: 3, skipped_count: 2, rev: 2 });
  });
});

describe("ticks that are due", () => {
  it("starts each tick once, in order, however often a node looks (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5000 }), { minLength: 1, maxLength: 20 }), (steps) => {
        const trigger = every(1000, { overlap: "allow" });
        let state = scheduleOf(trigger, "active", 0) as ScheduleState;
        const started: number[] = [];
        let now = 0;
        for (const step of steps) {
          now += step;
          const moved = drive(state, trigger, now);
          started.push(...moved.started);
          state = moved.state;
        }
        const expected = Array.from({ length: Math.floor(now / 1000) }, (_, i) => (i + 1) * 1000);
        expect(started).toEqual(expected);
        expect(state.next_at).toBe(Math.floor(now / 1000) * 1000 + 1000);
      }),
    );
  });

  it("starts late the ticks inside the catch-up window and records the older ones as one missed gap", () => {
    const trigger = every(1000, { overlap: "allow", catchup_window_ms: 10_000 });
    const state = scheduleOf(trigger, "active", 0) as ScheduleState;
    const { started, state: after } = drive(state, trigger, 100_500);
    // Ticks 1 s … 90 s are older than 90.5 s: missed; 91 s … 100 s are started late.
    expect(started).toEqual([91, 92, 93, 94, 95, 96, 97, 98, 99, 100].map((s) => s * 1000));
    expect(after.missed_count).toBe(90);
    expect(after.recent).toEqual([
      {
        outcome: "missed",
        scheduled_at: new Date(1000).toISOString(),
        last_scheduled_at: new Date(90_000).toISOString(),
        ticks: 90,
        recorded_at: new Date(100_500).toISOString(),
      },
    ]);
  });

  it("skip: a tick while the previous run has not ended is recorded as skipped", () => {
    const trigger = every(1000, { overlap: "skip" });
    const first = drive(scheduleOf(trigger, "active", 0) as ScheduleState, trigger, 1000);
    expect(first.started).toEqual([1000]);
    const second = drive(first.state, trigger, 3000, () => true);
    expect(second.started).toEqual([]);
    expect(second.state.skipped_count).toBe(2);
    expect(second.state.recent.map((r) => [r.outcome, r.scheduled_at])).toEqual([
      ["skipped", new Date(3000).toISOString()],
      ["skipped", new Date(2000).toISOString()],
    ]);
    expect(second.state.last_run_id).toBe("run_1000");
  });

  it("buffer_one: keeps one tick until the previous run ends, skips the others, then starts it", () => {
    const trigger = every(1000, { overlap: "buffer_one" });
    const first = drive(scheduleOf(trigger, "active", 0) as ScheduleState, trigger, 1000);
    const busy = drive(first.state, trigger, 3000, () => true);
    expect(busy.started).toEqual([]);
    expect(busy.state.buffered_at).toBe(2000);
    expect(busy.state.skipped_count).toBe(1);
    // While it waits, the schedule is looked at again within a second, before its next tick is due.
    expect(busy.state.due_at).toBe(4000);
    // The 1 s run ended: the buffered tick starts; the 4 s tick, meeting that one running, is kept in turn.
    const ended = drive(busy.state, trigger, 4000, (s) => s.last_run_id !== "run_1000");
    expect(ended.started).toEqual([2000]);
    expect(ended.state).toMatchObject({ buffered_at: 4000, last_run_id: "run_2000", next_at: 5000 });
  });

  it("buffer_one: a buffered tick is looked at again within a second, before a distant next tick", () => {
    const trigger = every(60_000, { overlap: "buffer_one" });
    const first = drive(scheduleOf(trigger, "active", 0) as ScheduleState, trigger, 60_000);
    const busy = drive(first.state, trigger, 120_000, () => true);
    expect(busy.state).toMatchObject({ buffered_at: 120_000, next_at: 180_000, due_at: 121_000 });
    const still = drive(busy.state, trigger, 121_000, () => true);
    expect(still.started).toEqual([]);
    expect(still.state).toMatchObject({ buffered_at: 120_000, due_at: 122_000 });
  });

  it("allow: starts every tick whatever runs", () => {
    const trigger = every(1000, { overlap: "allow" });
    expect(drive(scheduleOf(trigger, "active", 0) as ScheduleState, trigger, 3000, () => true).started).toEqual([1000, 2000, 3000]);
  });

  it("keeps at most the newest RECENT_KEPT ticks that started no run", () => {
    const trigger = every(1000, { overlap: "skip" });
    const first = drive(scheduleOf(trigger, "active", 0) as ScheduleState, trigger, 1000);
    const { state } = drive(first.state, trigger, 51_000, () => true);
    expect(state.skipped_count).toBe(50);
    expect(state.recent).toHaveLength(RECENT_KEPT);
    expect(state.recent[0].scheduled_at).toBe(new Date(51_000).toISOString());
  });

  it("shows the next ticks", () => {
    const trigger = every(60_000);
    const view = scheduleView("wf_1", trigger, scheduleOf(trigger, "active", 0));
    expect(view.next_run_at).toBe(new Date(60_000).toISOString());
    expect(view.upcoming).toEqual([1, 2, 3, 4, 5].map((m) => new Date(m * 60_000).toISOString()));
    expect(scheduleView("wf_1", trigger, scheduleOf(trigger, "inactive", 0)).upcoming).toEqual([]);
  });
});
