import type { Run, Step } from "../../../../shared/api/wire";
import { Time } from "../../ui";
import { durationText, failedStepOf, stopStepOf, timedOutOf, waitingOf, type Waiting } from "./run-facts.logic";

/**
 * How the run ended, said at the top of its page: the stop step that ended it and its message, the
 * step a failed run failed at (its `failed_step`), and the time limit that passed, with its deadline.
 */
export function RunOutcome({ run }: { run: Run }) {
  const stop = stopStepOf(run);
  const failed = failedStepOf(run);
  const [late] = timedOutOf(run).filter((t) => t.kind === "run" || t.step.id === failed?.id);
  if (stop)
    return (
      <div class={`notice ${run.status === "failed" ? "error" : "ok"} run-outcome`} role="status" aria-label="How the run ended">
        <span>
          Stopped by step <code>{stop.id}</code> as <strong>{run.status}</strong>
          {run.stop_message ? (
            <>
              : <q class="break">{run.stop_message}</q>
            </>
          ) : (
            ", without a message"
          )}
        </span>
      </div>
    );
  if (!failed) return null;
  return (
    <div class="notice error run-outcome" role="status" aria-label="How the run ended">
      {late?.kind === "run" ? (
        <span>
          Timed out: the run had not ended by its deadline
          {late.deadline !== null && (
            <>
              {" "}
              <Time at={late.deadline} />
            </>
          )}
          {late.timeoutMs !== null && ` (its workflow's timeout_ms, ${durationText(late.timeoutMs)})`}; it failed at step{" "}
          <code>{failed.id}</code>.
        </span>
      ) : late?.kind === "approval" ? (
        <span>
          Timed out: no decision on approval step <code>{failed.id}</code>
          {failed.timeout_at && (
            <>
              {" "}
              by <Time at={failed.timeout_at} />
            </>
          )}
          .
        </span>
      ) : (
        <span>
          Failed at step <code>{failed.id}</code>
          {failed.error && (
            <>
              : <span class="break">{failed.error}</span>
            </>
          )}
        </span>
      )}
    </div>
  );
}

/** What a waiting run waits for and until when: a person (until its approval times out, if it does) or a delay's end. */
export function RunWaiting({ run, definitions }: { run: Run; definitions: ReadonlyMap<string, Step> }) {
  const waiting = waitingOf(run, definitions);
  if (!waiting) return null;
  const approval = run.pending_approval;
  return (
    <div class="notice wait" role="status" aria-label="What the run waits for">
      <span>
        {approval ? (
          <>
            This run waits for approval at step <code>{approval.step_id}</code>
            {approval.message !== null && (
              <>
                : <q class="break">{approval.message}</q>
              </>
            )}
          </>
        ) : (
          <>
            This run waits at step <code>{waiting.step.id}</code>
            {waiting.step.type === "run_workflow" && (
              <>
                {" "}
                for its child run <code>{String((waiting.step.output as { run_id?: unknown } | null)?.run_id)}</code>
              </>
            )}
            .
          </>
        )}
      </span>{" "}
      <span>{approval ? <UntilDecided waiting={waiting} /> : <UntilDelayEnds waiting={waiting} />}</span>
    </div>
  );
}

/** An approval waits for a person, bounded by its own time-out and the run's deadline, whichever comes first. */
function UntilDecided({ waiting: { until, deadline } }: { waiting: Waiting }) {
  if (deadline !== null)
    return (
      <>
        Until someone decides, at most until <Time at={deadline} />: then the run times out
        {until !== null && (
          <>
            {" "}
            (the step's own time-out, <Time at={until} />, comes later)
          </>
        )}
        .
      </>
    );
  if (until !== null)
    return (
      <>
        Until someone decides, at most until <Time at={until} />: then the step times out.
      </>
    );
  return <>Until someone decides.</>;
}

/** A delay waits until its end, unless the run's deadline comes first. */
function UntilDelayEnds({ waiting: { until, deadline } }: { waiting: Waiting }) {
  return (
    <>
      {until !== null && (
        <>
          Until <Time at={until} />.
        </>
      )}
      {deadline !== null && (
        <>
          {" "}
          The run times out before that, at <Time at={deadline} />.
        </>
      )}
    </>
  );
}
