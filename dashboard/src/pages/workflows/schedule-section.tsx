import type { Run, Schedule } from "../../api";
import { href } from "../../session";
import { DataTable, Loaded, Status, Time, useApi } from "../../ui";
import { recentTicks, tickText } from "./schedule-ticks.logic";

/**
 * A scheduled workflow's schedule (GET /workflows/{id}/schedule): when it ticks next, its counts of
 * ticks missed and skipped, and its recent ticks, those that started a run (from the workflow's
 * newest runs) with those that started none.
 */
export function ScheduleSection({ workflowId }: { workflowId: string }) {
  const path = `/workflows/${encodeURIComponent(workflowId)}`;
  const schedule = useApi<Schedule>(`${path}/schedule`, undefined, 5000);
  const runs = useApi<Run[]>(`${path}/runs`, { per_page: 20 }, 5000);
  return (
    <section aria-labelledby="schedule-title" class="panel">
      <h3 id="schedule-title">Schedule</h3>
      <Loaded state={schedule} what="the schedule">
        {(s) => (
          <>
            <dl class="facts">
              <dt>Next run</dt>
              <dd>{s.next_run_at ? <Time at={s.next_run_at} /> : <span class="muted">none while the workflow is inactive</span>}</dd>
              <dt>Missed ticks</dt>
              <dd>{s.missed_count}</dd>
              <dt>Skipped ticks</dt>
              <dd>{s.skipped_count}</dd>
              {s.buffered_at && (
                <>
                  <dt>Buffered tick</dt>
                  <dd>
                    <Time at={s.buffered_at} /> <span class="muted">waits for the run before it to end</span>
                  </dd>
                </>
              )}
              {s.last_run_id && (
                <>
                  <dt>Last started</dt>
                  <dd>
                    <a href={href("workflows", workflowId, "runs", s.last_run_id)}>{s.last_run_id}</a>
                  </dd>
                </>
              )}
            </dl>
            <h4 id="upcoming-title">Next ticks</h4>
            {s.upcoming.length === 0 ? (
              <p class="muted">None: the workflow is inactive.</p>
            ) : (
              <ol aria-labelledby="upcoming-title" class="upcoming">
                {s.upcoming.map((at) => (
                  <li key={at}>
                    <Time at={at} />
                  </li>
                ))}
              </ol>
            )}
            <h4>Recent ticks</h4>
            <RecentTicks workflowId={workflowId} schedule={s} runs={runs.data ?? []} />
          </>
        )}
      </Loaded>
    </section>
  );
}

function RecentTicks({ workflowId, schedule, runs }: { workflowId: string; schedule: Schedule; runs: Run[] }) {
  const rows = recentTicks(schedule, runs);
  if (rows.length === 0) return <p class="muted">No ticks yet.</p>;
  return (
    <DataTable
      caption="Recent ticks"
      rows={rows}
      rowKey={(r) => r.key}
      columns={[
        {
          title: "Tick",
          cell: (r) =>
            r.ticks > 1 ? (
              <>
                <Time at={r.scheduled_at} /> to <Time at={r.last_scheduled_at} />
              </>
            ) : (
              <Time at={r.scheduled_at} />
            ),
        },
        { title: "Outcome", cell: (r) => <Status value={r.outcome} /> },
        {
          title: "What happened",
          cell: (r) => (
            <>
              {tickText(r)}
              {r.run && (
                <>
                  {" "}
                  <a href={href("workflows", workflowId, "runs", r.run.id)}>{r.run.id}</a> <Status value={r.run.status} />
                </>
              )}
            </>
          ),
        },
        { title: "Recorded", cell: (r) => (r.recorded_at ? <Time at={r.recorded_at} /> : <span class="muted">—</span>) },
      ]}
    />
  );
}
