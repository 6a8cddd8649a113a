import type { RunStep, Step } from "../../../../shared/api/wire";
import { DataTable, Time } from "../../ui";
import { attemptRowsOf, durationText, type AttemptRow } from "./run-facts.logic";

/** An http step's retry policy in a line, as its definition gives it (the short form `retries`, or `retry`). */
function policyText(step: Extract<Step, { type: "http" }>): string {
  const r = step.retry;
  if (!r) return step.retries > 0 ? `up to ${step.retries + 1} attempts, the platform's back-off` : "one attempt, no retry";
  const jitter = r.jitter === "full" ? ", random within" : "";
  return `up to ${r.max_attempts} attempts on ${r.on.join(", ")}; first wait ${durationText(r.initial_interval_ms)}${jitter}, ×${r.backoff_rate}, at most ${durationText(r.max_interval_ms)}`;
}

const outcome = (a: AttemptRow) => (a.status_code !== undefined ? `HTTP ${a.status_code}` : a.error === null ? "ok" : "no answer");

/**
 * Every attempt of an http step the run keeps (the newest 10): when, how long, what came back and
 * why it failed, and how long the step waited before it (the retry wait, Retry-After included).
 */
export function StepAttempts({ step, definition }: { step: RunStep; definition: Step | undefined }) {
  const rows = attemptRowsOf(step.attempts);
  if (rows.length === 0) return null;
  const dropped = step.attempt_count - rows.length;
  return (
    <details open={rows.length > 1 || step.status === "failed"} class="step-attempts">
      <summary>
        Attempts ({step.attempt_count}
        {dropped > 0 && `, the newest ${rows.length} kept`})
      </summary>
      {definition?.type === "http" && <p class="small muted">Retry policy: {policyText(definition)}</p>}
      <DataTable
        caption={`Attempts of step ${step.id}`}
        rows={rows}
        rowKey={(a) => a.attempt}
        columns={[
          { title: "#", cell: (a) => a.attempt },
          { title: "Waited before", cell: (a) => (a.waitedMs === null ? <span class="muted">—</span> : durationText(a.waitedMs)) },
          { title: "Started", cell: (a) => <Time at={a.started_at} /> },
          { title: "Took", cell: (a) => durationText(a.tookMs) },
          {
            title: "Outcome",
            cell: (a) => <span class={a.error === null ? "" : "attempt-failed"}>{outcome(a)}</span>,
          },
          { title: "Error", class: "break", cell: (a) => a.error ?? <span class="muted">—</span> },
        ]}
      />
    </details>
  );
}
