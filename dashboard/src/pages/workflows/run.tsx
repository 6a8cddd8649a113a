import { useState } from "preact/hooks";
import { call, TERMINAL_RUN, type Run, type WorkflowVersion } from "../../api";
import { href } from "../../session";
import { Confirm, ErrorNotice, Json, Loaded, NeedsScope, Status, Time, useAccount, useAction, useApi } from "../../ui";
import { actorText, COMMENT_MAX, startedBy } from "./common";
import { definitionsOf, durationText, stepsOfRun, stopStepOf } from "./run-facts.logic";
import { RunGraph } from "./run-graph";
import { RunOutcome, RunWaiting } from "./run-outcome";
import { RunSteps } from "./run-steps";

type Decision = "approve" | "reject" | "cancel";
const DECISIONS: Record<Decision, { title: string; body: string; action: string; danger?: true }> = {
  approve: { title: "Approve this run?", body: "The run goes on with its next step.", action: "Approve" },
  reject: { title: "Reject this run?", body: "The run ends as failed; no further step runs.", action: "Reject", danger: true },
  cancel: {
    title: "Cancel this run?",
    body: "The run stops after the step in flight, if any, and ends as cancelled.",
    action: "Cancel run",
    danger: true,
  },
};

export function RunPage({ workflowId, runId }: { workflowId: string; runId: string }) {
  const { key, can } = useAccount();
  const base = `/workflows/${encodeURIComponent(workflowId)}/runs/${encodeURIComponent(runId)}`;
  const [asking, setAsking] = useState<Decision | null>(null);
  const [comment, setComment] = useState("");
  const run = useApi<Run>(base, undefined, 1500);
  const decide = useAction((kind: Decision) =>
    call<Run>(key, "POST", `${base}/${kind}`, kind === "cancel" || comment.trim() === "" ? undefined : { comment: comment.trim() }),
  );
  const again = useAction((kind: "retry" | "rerun") => call<Run>(key, "POST", `${base}/${kind}`));
  const current = run.data;
  // The definition the run follows (its steps' conditions and time limits); a version no longer kept leaves them out.
  const version = useApi<WorkflowVersion>(
    current ? `/workflows/${encodeURIComponent(workflowId)}/versions/${current.workflow_version}` : null,
  );
  // A child of an inline map or a parallel branch runs a list of steps inside its version's definition.
  const steps = current ? stepsOfRun(version.data?.steps, current) : undefined;
  const definitions = definitionsOf(steps);
  const pending = current?.status === "waiting" ? current.pending_approval : null;
  const waitingApproval = pending !== null && pending !== undefined;
  // A rejection or a stop step is a decision, not a fault: retried, it would end the same way; it is rerun.
  const retryable = current?.status === "failed" && !current.steps.some((s) => s.decision?.decision === "rejected") && !stopStepOf(current);

  return (
    // data-definition: whether the steps' definitions (conditions, time limits) are read yet.
    <section aria-labelledby="run-title" data-definition={version.data ? "read" : version.error ? "missing" : "reading"}>
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("workflows")}>Workflows</a> / <a href={href("workflows", workflowId)}>{workflowId}</a> / <span>{runId}</span>
      </nav>
      <Loaded state={run} what="the run">
        {(r) => (
          <>
            <header class="page-head">
              <h2 id="run-title">
                Run <code>{r.id}</code>
              </h2>
              <Status value={r.status} />
            </header>
            <dl class="facts">
              <dt>Workflow version</dt>
              <dd>v{r.workflow_version}</dd>
              <dt>Started by</dt>
              <dd>{startedBy(r)}</dd>
              <dt>Created</dt>
              <dd>
                <Time at={r.created_at} />
              </dd>
              <dt>Finished</dt>
              <dd>
                <Time at={r.finished_at} />
              </dd>
              {r.attempt > 1 && (
                <>
                  <dt>Attempt</dt>
                  <dd>{r.attempt}</dd>
                </>
              )}
              {r.rerun_of && (
                <>
                  <dt>Rerun of</dt>
                  <dd>
                    <a href={href("workflows", workflowId, "runs", r.rerun_of)}>{r.rerun_of}</a>
                  </dd>
                </>
              )}
              {typeof r.timeout_ms === "number" && (
                <>
                  <dt>Time limit</dt>
                  <dd>
                    {durationText(r.timeout_ms)}
                    {r.deadline_at && (
                      <>
                        , until <Time at={r.deadline_at} />
                      </>
                    )}
                  </dd>
                </>
              )}
              {r.status === "succeeded" && (
                <>
                  <dt>Output</dt>
                  <dd>
                    <code class="break">{JSON.stringify(r.output)}</code>
                  </dd>
                </>
              )}
              {r.cancel_reason === "parent_ended" && (
                <>
                  <dt>Cancelled</dt>
                  <dd>with its parent run</dd>
                </>
              )}
              {r.cancelled_by && (
                <>
                  <dt>Cancelled by</dt>
                  <dd>
                    {actorText(r.cancelled_by)}
                    {r.cancel_reason === "workflow_deleted" && " (the workflow was deleted)"}
                  </dd>
                </>
              )}
            </dl>
            <RunOutcome run={r} />
            <RunWaiting run={r} definitions={definitions} />
            {!TERMINAL_RUN.has(r.status) &&
              (can("workflows:write") ? (
                <div class="actions left">
                  {waitingApproval && (
                    <>
                      <button type="button" onClick={() => setAsking("approve")}>
                        Approve
                      </button>
                      <button type="button" class="outline danger" onClick={() => setAsking("reject")}>
                        Reject
                      </button>
                    </>
                  )}
                  <button type="button" class="outline secondary" onClick={() => setAsking("cancel")}>
                    Cancel run
                  </button>
                </div>
              ) : (
                <NeedsScope scope="workflows:write" />
              ))}
            {TERMINAL_RUN.has(r.status) && can("workflows:write") && (
              <div class="actions left">
                {retryable && (
                  <button
                    type="button"
                    aria-busy={again.pending}
                    disabled={again.pending}
                    onClick={async () => (await again.go("retry")) && run.reload()}
                  >
                    Retry from the failed step
                  </button>
                )}
                <button
                  type="button"
                  class="outline secondary"
                  aria-busy={again.pending}
                  disabled={again.pending}
                  onClick={async () => {
                    const next = await again.go("rerun");
                    if (next) location.hash = href("workflows", workflowId, "runs", next.id);
                  }}
                >
                  Rerun with the same input
                </button>
              </div>
            )}
            <ErrorNotice error={decide.error ?? again.error} />
            <h3>Graph</h3>
            {(version.data || version.error) && <RunGraph key={r.status} run={r} steps={steps} />}
            <h3>Steps</h3>
            <RunSteps run={r} definitions={definitions} />
            <details>
              <summary>Input</summary>
              <Json value={r.input} label="Run input" />
            </details>
          </>
        )}
      </Loaded>
      {asking && (
        <Confirm
          title={DECISIONS[asking].title}
          body={
            asking === "cancel" ? (
              <p>{DECISIONS[asking].body}</p>
            ) : (
              <>
                {pending?.message !== null && pending?.message !== undefined && (
                  <blockquote class="approval-message break" aria-label="Approval message">
                    {pending.message}
                  </blockquote>
                )}
                <p>{DECISIONS[asking].body}</p>
                <label>
                  Comment (optional)
                  <textarea
                    name="comment"
                    rows={3}
                    maxLength={COMMENT_MAX}
                    value={comment}
                    onInput={(e) => setComment((e.target as HTMLTextAreaElement).value)}
                  />
                </label>
              </>
            )
          }
          action={DECISIONS[asking].action}
          tone={DECISIONS[asking].danger && "danger"}
          pending={decide.pending}
          onCancel={() => setAsking(null)}
          onConfirm={async () => {
            const kind = asking;
            const done = await decide.go(kind);
            setAsking(null);
            if (done) {
              setComment("");
              run.reload();
            }
          }}
        />
      )}
    </section>
  );
}
