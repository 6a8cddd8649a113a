import { useState } from "preact/hooks";
import { call, type Run } from "../../api";
import { href } from "../../session";
import { Confirm, Empty, ErrorNotice, Loaded, NeedsScope, Time, useAccount, useAction, useApi } from "../../ui";
import { COMMENT_MAX } from "./common";

/**
 * Runs waiting at an approval step (GET /runs?status=waiting, those with a pending approval), each
 * with its message and Approve / Reject from the list. Every key with workflows:write may decide,
 * so "waiting for me" is every approval waiting in this environment.
 */
export function ApprovalsPage() {
  const { can, identity } = useAccount();
  const waiting = useApi<Run[]>("/runs", { status: "waiting", per_page: 100 }, 3000);
  return (
    <section aria-labelledby="approvals-title">
      <header class="page-head">
        <h2 id="approvals-title">Approvals waiting</h2>
      </header>
      {!can("workflows:write") && <NeedsScope scope="workflows:write" />}
      <Loaded state={waiting} what="runs waiting">
        {(runs) => {
          const asking = runs.filter((r) => r.pending_approval);
          return asking.length === 0 ? (
            <Empty>No run in {identity.environment} waits for an approval.</Empty>
          ) : (
            <ul class="approvals">
              {asking.map((r) => (
                <Approval key={r.id} run={r} onDecided={waiting.reload} />
              ))}
            </ul>
          );
        }}
      </Loaded>
    </section>
  );
}

function Approval({ run, onDecided }: { run: Run; onDecided(): void }) {
  const { key, can } = useAccount();
  const [asking, setAsking] = useState<"approve" | "reject" | null>(null);
  const [comment, setComment] = useState("");
  const base = `/workflows/${encodeURIComponent(run.workflow_id)}/runs/${encodeURIComponent(run.id)}`;
  const decide = useAction((kind: "approve" | "reject") =>
    call<Run>(key, "POST", `${base}/${kind}`, comment.trim() ? { comment: comment.trim() } : undefined),
  );
  const pending = run.pending_approval!;
  return (
    <li class="approval panel" aria-label={`Approval of ${run.id}`}>
      <p class="approval-message break">{pending.message ?? <span class="muted">No message.</span>}</p>
      <p class="small muted break">
        Step <code>{pending.step_id}</code> of run <a href={href("workflows", run.workflow_id, "runs", run.id)}>{run.id}</a>, asked{" "}
        <Time at={pending.requested_at} />
      </p>
      {can("workflows:write") && (
        <div class="actions">
          <button type="button" class="small" onClick={() => setAsking("approve")}>
            Approve
          </button>
          <button type="button" class="outline danger small" onClick={() => setAsking("reject")}>
            Reject
          </button>
        </div>
      )}
      <ErrorNotice error={decide.error} />
      {asking && (
        <Confirm
          title={asking === "approve" ? "Approve this run?" : "Reject this run?"}
          body={
            <>
              {pending.message && (
                <blockquote class="approval-message break" aria-label="Approval message">
                  {pending.message}
                </blockquote>
              )}
              <p>{asking === "approve" ? "The run goes on with its next step." : "The run ends as failed; no further step runs."}</p>
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
          }
          action={asking === "approve" ? "Approve" : "Reject"}
          tone={asking === "reject" ? "danger" : undefined}
          pending={decide.pending}
          onCancel={() => setAsking(null)}
          onConfirm={async () => {
            const done = await decide.go(asking);
            setAsking(null);
            if (done) onDecided();
          }}
        />
      )}
    </li>
  );
}
