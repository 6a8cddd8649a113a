import type { ApprovalDecision, Run, RunStep, Step } from "../../../../shared/api/wire";
import { Json, Status, Time } from "../../ui";
import { actorText } from "./common";
import { skipReasonOf } from "./run-facts.logic";
import { SkipReasonText } from "./skip-reason";
import { StepAttempts } from "./step-attempts";

function DecisionNote({ decision: d }: { decision: ApprovalDecision }) {
  return (
    <p class="decision" role="note">
      {d.decision === "approved" ? "Approved" : "Rejected"} by <strong>{actorText(d.decided_by)}</strong> <Time at={d.decided_at} />
      {d.comment && <q class="break">{d.comment}</q>}
    </p>
  );
}

/** Why a skipped step did not run: its condition was false, or the run ended before it. */
function SkipNote({ run, step, definition }: { run: Run; step: RunStep; definition: Step | undefined }) {
  const why = skipReasonOf(run, step, definition);
  if (!why) return null;
  return <SkipReasonText why={why} class={why.kind === "condition" ? "small muted break skip-reason" : "small muted skip-reason"} />;
}

/** The approval's time limit: when it times out while it waits, or that it did. */
function ApprovalDeadline({ step }: { step: RunStep }) {
  if (step.type !== "approval" || !step.timeout_at) return null;
  if (step.error_code === "timed_out")
    return (
      <p class="small timed-out" role="note">
        Timed out: no decision by <Time at={step.timeout_at} />.
      </p>
    );
  if (step.status !== "waiting") return null;
  return (
    <p class="small muted">
      Times out at <Time at={step.timeout_at} /> if no one decides.
    </p>
  );
}

function StepItem({ run, step: s, definition }: { run: Run; step: RunStep; definition: Step | undefined }) {
  const continued = s.status === "failed" && definition?.on_error === "continue";
  return (
    <li class={`run-step ${s.status}`} aria-label={`Step ${s.id}: ${s.status}`}>
      <header>
        <code>{s.id}</code> <span class="chip">{s.type}</span> <Status value={s.status} />
        {s.attempt_count > 1 && <small class="muted"> {s.attempt_count} attempts</small>}
        <small class="muted right">
          <Time at={s.started_at} /> → <Time at={s.finished_at} />
        </small>
      </header>
      <SkipNote run={run} step={s} definition={definition} />
      {definition?.if !== undefined && s.status !== "skipped" && (
        <p class="small muted break">
          {s.status === "pending" ? "Runs only if" : "Its condition held"}: <code>{definition.if}</code>
        </p>
      )}
      {s.type === "approval" && s.message !== undefined && s.message !== null && (
        <p class="muted break">
          Asked: <q>{s.message}</q>
        </p>
      )}
      <ApprovalDeadline step={s} />
      {s.waiting_for && (
        <p class="small muted break">
          {s.status === "waiting" ? "Waits for" : "Waited for"} <code>{s.waiting_for.event_type}</code>
          {Object.keys(s.waiting_for.match).length > 0 && (
            <>
              {" "}
              with <code>{JSON.stringify(s.waiting_for.match)}</code>
            </>
          )}
          {s.status === "waiting" && s.timeout_at && (
            <>
              , until <Time at={s.timeout_at} />
            </>
          )}
          .
        </p>
      )}
      {s.decision && <DecisionNote decision={s.decision} />}
      {s.error && (
        <p class="step-error" role="note">
          {s.error}
          {s.error_code && <small class="muted"> ({s.error_code})</small>}
        </p>
      )}
      {continued && <p class="small muted">The run went on past this failure (on_error: continue).</p>}
      <StepAttempts step={s} definition={definition} />
      {s.output !== null && s.output !== undefined && (
        <details>
          <summary>Output</summary>
          <Json value={s.output} label={`Output of step ${s.id}`} />
        </details>
      )}
    </li>
  );
}

/** A run's steps in order, each with its status, why it was skipped, its attempts, error and output. */
export function RunSteps({ run, definitions }: { run: Run; definitions: ReadonlyMap<string, Step> }) {
  return (
    <ol class="run-steps">
      {run.steps.map((s) => (
        <StepItem key={s.id} run={run} step={s} definition={definitions.get(s.id)} />
      ))}
    </ol>
  );
}
