import type { Run, Schedule } from "../../../../shared/api/wire";

/** One row of a schedule's recent ticks: a tick that started a run, or ticks that started none. */
export interface TickRow {
  key: string;
  outcome: "started" | "missed" | "skipped";
  scheduled_at: string;
  /** missed: the gap's last tick and how many ticks it held; otherwise the tick itself, and 1. */
  last_scheduled_at: string;
  ticks: number;
  /** started: the run, and how it was started (`tick`, `trigger`: by hand, `backfill`). */
  run?: { id: string; status: Run["status"]; source: "tick" | "trigger" | "backfill" };
  /** missed or skipped: when the platform recorded it. */
  recorded_at?: string;
}

/**
 * A schedule's recent ticks, newest first: the runs among `runs` (a workflow's newest) that its
 * schedule started, and the ticks it recorded as missed or skipped (`schedule.recent`), at most `max`.
 */
export function recentTicks(schedule: Schedule, runs: readonly Run[], max = 20): TickRow[] {
  const started: TickRow[] = runs.flatMap((r) =>
    r.trigger.type === "schedule"
      ? [
          {
            key: r.id,
            outcome: "started" as const,
            scheduled_at: r.trigger.scheduled_at,
            last_scheduled_at: r.trigger.scheduled_at,
            ticks: 1,
            run: { id: r.id, status: r.status, source: r.trigger.source },
          },
        ]
      : [],
  );
  const missed: TickRow[] = schedule.recent.map((m) => ({
    key: `${m.outcome}:${m.scheduled_at}`,
    outcome: m.outcome,
    scheduled_at: m.scheduled_at,
    last_scheduled_at: m.last_scheduled_at ?? m.scheduled_at,
    ticks: m.ticks ?? 1,
    recorded_at: m.recorded_at,
  }));
  // Newest tick first; ISO times of one format sort as text.
  return [...started, ...missed]
    .sort((a, b) => (a.scheduled_at < b.scheduled_at ? 1 : a.scheduled_at > b.scheduled_at ? -1 : 0))
    .slice(0, max);
}

/** What a row's outcome means, in words. */
export function tickText(row: TickRow): string {
  switch (row.outcome) {
    case "started":
      return row.run?.source === "trigger" ? "started by hand" : row.run?.source === "backfill" ? "started by a backfill" : "started";
    case "skipped":
      return "skipped: the run before it had not ended (overlap)";
    case "missed":
      return row.ticks === 1
        ? "missed: older than the catch-up window when the platform saw it"
        : `missed: ${row.ticks} ticks, older than the catch-up window when the platform saw them`;
  }
}
