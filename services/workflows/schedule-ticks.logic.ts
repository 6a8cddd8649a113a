import type { Schedule, ScheduleMiss, ScheduleTrigger, Trigger } from "../../shared/api/wire";
import { countTicks, nextTick } from "./schedule-trigger.logic";

/**
 * A schedule's stored state (the workflow's `schedule` field) and its transitions: which tick is
 * next, and what a node does with a tick that is due. Every transition is one compare-and-set on
 * `rev` (schedules.mixin.ts), and a started tick's run has the unique key `<workflow_id>/schedule/<ms>`,
 * so a tick starts at most one run whatever the number of nodes, restarts and kills.
 */
export interface ScheduleState {
  /** Bumped by every write of the schedule: the compare-and-set of the nodes that tick it. */
  rev: number;
  /** The next tick (ms); absent while the workflow is inactive. */
  next_at?: number;
  /** When a node looks at it next (indexed, sparse): the next tick, or sooner while a tick is buffered. */
  due_at?: number;
  /** buffer_one: the tick that waits for the previous run to end. */
  buffered_at?: number;
  /** The run the last started tick started (the overlap policy looks at it). */
  last_run_id?: string;
  missed_count: number;
  skipped_count: number;
  /** Ticks that started no run, newest first, at most RECENT_KEPT. */
  recent: ScheduleMiss[];
}

export const RECENT_KEPT = 20;
/** A gap of missed ticks is counted up to this many (a cron is walked tick by tick). */
export const MISSED_COUNT_CAP = 10_000;
/** How often a buffered tick looks whether the run before it has ended. */
export const BUFFER_RECHECK_MS = 1_000;
/** Ticks shown ahead by GET …/schedule. */
export const UPCOMING_SHOWN = 5;

export const isSchedule = (trigger: Trigger): trigger is ScheduleTrigger => trigger.type === "schedule";
export const scheduleKey = (workflowId: string, tickMs: number): string => `${workflowId}/schedule/${tickMs}`;
const iso = (ms: number): string => new Date(ms).toISOString();

function dueOf(nextAt: number | undefined, bufferedAt: number | undefined, now: number): number | undefined {
  if (bufferedAt === undefined) return nextAt;
  return Math.min(nextAt ?? Infinity, now + BUFFER_RECHECK_MS);
}

/** A state with these times (undefined ones absent, as the store keeps them). */
function withTimes(state: ScheduleState, nextAt: number | undefined, bufferedAt: number | undefined, now: number): ScheduleState {
  const { next_at: _n, due_at: _d, buffered_at: _b, ...rest } = state;
  const due = dueOf(nextAt, bufferedAt, now);
  return {
    ...rest,
    rev: state.rev + 1,
    ...(nextAt !== undefined && { next_at: nextAt }),
    ...(due !== undefined && { due_at: due }),
    ...(bufferedAt !== undefined && { buffered_at: bufferedAt }),
  };
}

const remember = (recent: ScheduleMiss[], miss: ScheduleMiss): ScheduleMiss[] => [miss, ...recent].slice(0, RECENT_KEPT);

/**
 * The schedule of a workflow with `trigger` and `status` as of `now`: ticking from the first tick
 * after now while active, idle while inactive; what `previous` recorded is kept. None for a
 * trigger that is not a schedule.
 */
export function scheduleOf(
  trigger: Trigger,
  status: "active" | "inactive",
  now: number,
  previous?: ScheduleState,
): ScheduleState | undefined {
  if (!isSchedule(trigger)) return undefined;
  const base: ScheduleState = {
    rev: previous?.rev ?? 0,
    missed_count: previous?.missed_count ?? 0,
    skipped_count: previous?.skipped_count ?? 0,
    recent: previous?.recent ?? [],
    ...(previous?.last_run_id !== undefined && { last_run_id: previous.last_run_id }),
  };
  return withTimes(base, status === "active" ? (nextTick(trigger, now) ?? undefined) : undefined, undefined, now);
}

/** What a node does with a due schedule: start a run for `start` (a tick), and store `next` in the same write. */
export interface TickMove {
  start: number | null;
  next: ScheduleState;
}

/**
 * The next move of a schedule that is due at `now`, or null when it is not. `previousRunning`:
 * whether the run of the last started tick has not ended (only asked for when the overlap policy
 * or a buffered tick needs it). A tick older than the catch-up window is not started: the whole gap
 * up to the window becomes one `missed` entry. Call again after each move: a schedule behind by
 * several ticks moves one tick (or one gap) at a time.
 */
export function nextMove(state: ScheduleState, trigger: ScheduleTrigger, now: number, previousRunning: boolean): TickMove | null {
  if (state.due_at === undefined || state.due_at > now) return null;
  const tick = state.next_at;
  if (state.buffered_at !== undefined) {
    if (!previousRunning) return { start: state.buffered_at, next: withTimes(state, tick, undefined, now) };
    if (tick === undefined || tick > now) return { start: null, next: withTimes(state, tick, state.buffered_at, now) };
  }
  if (tick === undefined || tick > now) return { start: null, next: withTimes(state, tick, state.buffered_at, now) };
  const windowStart = now - trigger.catchup_window_ms;
  if (tick < windowStart) {
    const { count, last } = countTicks(trigger, tick, windowStart, MISSED_COUNT_CAP);
    const miss: ScheduleMiss = {
      outcome: "missed",
      scheduled_at: iso(tick),
      last_scheduled_at: iso(last ?? tick),
      ticks: count,
      recorded_at: iso(now),
    };
    const moved = withTimes(state, nextTick(trigger, windowStart - 1) ?? undefined, state.buffered_at, now);
    return { start: null, next: { ...moved, missed_count: state.missed_count + count, recent: remember(state.recent, miss) } };
  }
  const after = nextTick(trigger, tick) ?? undefined;
  if (trigger.overlap !== "allow" && previousRunning) {
    if (trigger.overlap === "buffer_one" && state.buffered_at === undefined)
      return { start: null, next: withTimes(state, after, tick, now) };
    const miss: ScheduleMiss = { outcome: "skipped", scheduled_at: iso(tick), recorded_at: iso(now) };
    const moved = withTimes(state, after, state.buffered_at, now);
    return { start: null, next: { ...moved, skipped_count: state.skipped_count + 1, recent: remember(state.recent, miss) } };
  }
  return { start: tick, next: withTimes(state, after, state.buffered_at, now) };
}

/** The state as GET /workflows/{id}/schedule shows it. */
export function scheduleView(workflowId: string, trigger: ScheduleTrigger, state: ScheduleState | undefined): Schedule {
  const upcoming: string[] = [];
  for (let at = state?.next_at ?? null; at !== null && upcoming.length < UPCOMING_SHOWN; at = nextTick(trigger, at)) upcoming.push(iso(at));
  return {
    object: "schedule",
    workflow_id: workflowId,
    next_run_at: state?.next_at !== undefined ? iso(state.next_at) : null,
    upcoming,
    buffered_at: state?.buffered_at !== undefined ? iso(state.buffered_at) : null,
    last_run_id: state?.last_run_id ?? null,
    missed_count: state?.missed_count ?? 0,
    skipped_count: state?.skipped_count ?? 0,
    recent: state?.recent ?? [],
  };
}
