import { required, seg, type Command } from "../command";
import { safe } from "../printable.logic";
import { describeRun } from "./workflows";

/** A schedule for people: its next ticks, then the ticks that started no run, newest first. */
function describeSchedule(s: any): string {
  const lines = [
    safe`${s.workflow_id}  next run ${s.next_run_at ?? "none (the workflow is inactive)"}`,
    safe`upcoming: ${(s.upcoming as string[]).join(", ") || "none"}`,
    safe`missed ${s.missed_count}, skipped ${s.skipped_count}; last run ${s.last_run_id ?? "none"}`,
  ];
  if (s.buffered_at) lines.push(safe`buffered: the tick of ${s.buffered_at} waits for the previous run to end`);
  for (const m of s.recent as any[]) {
    const span = m.outcome === "missed" && m.ticks > 1 ? safe` to ${m.last_scheduled_at} (${m.ticks} ticks)` : "";
    lines.push(safe`  ${m.outcome.padEnd(7)}  ${m.scheduled_at}` + span + safe`  recorded ${m.recorded_at}`);
  }
  return lines.join("\n");
}

/** A backfill for people: the ticks of the range, each run started, and the ticks that had one. */
function describeBackfill(b: any): string {
  const lines = [
    safe`${b.workflow_id}  [${b.from}, ${b.to}): ${b.ticks} ticks, ${b.started.length} started, ${b.already_started.length} had a run`,
  ];
  for (const s of b.started as any[]) lines.push(safe`  ${s.scheduled_at}  ${s.run_id}`);
  return lines.join("\n");
}

export const SCHEDULE_COMMANDS: Record<string, Command> = {
  "workflows schedule": {
    args: "WORKFLOW_ID",
    summary: "a scheduled workflow's next ticks, and its ticks that started no run (missed or skipped)",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("GET", `/workflows/${seg(c.positionals[0])}/schedule`);
      c.out.line(data, describeSchedule(data));
    },
  },
  "workflows trigger-schedule": {
    args: "WORKFLOW_ID",
    summary: "start a run of a scheduled workflow now, with the schedule's input, whatever its overlap policy",
    positionals: 1,
    async run(c) {
      const { data } = await c.api().call("POST", `/workflows/${seg(c.positionals[0])}/schedule/trigger`);
      c.out.line(data, describeRun(data));
    },
  },
  "workflows backfill": {
    args: "WORKFLOW_ID --from TIME --to TIME",
    summary: "start a run for each past tick in [from, to) that has none (at most 100 ticks)",
    details: "TIME: ISO 8601, such as 2026-11-20T00:00:00Z; --to not after now. Sent again, it starts only the ticks still without a run.",
    options: { from: { type: "string" }, to: { type: "string" } },
    positionals: 1,
    async run(c) {
      const body = { from: required(c, "from"), to: required(c, "to") };
      const { data } = await c.api().call("POST", `/workflows/${seg(c.positionals[0])}/schedule/backfill`, body);
      c.out.line(data, describeBackfill(data));
    },
  },
};
