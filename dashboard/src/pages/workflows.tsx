import { useState } from "preact/hooks";
import { call, TERMINAL_RUN, type Run, type Workflow, type WorkflowWithSecret } from "../api";
import type { Actor, ApprovalDecision } from "../../../shared/api/wire";
import { href } from "../session";
import {
  Choice,
  Confirm,
  ErrorNotice,
  Json,
  JsonField,
  ListOf,
  Loaded,
  NeedsScope,
  SecretOnce,
  Status,
  Time,
  statusOptions,
  useAccount,
  useAction,
  useApi,
  useSecretRotation,
  useJsonText,
} from "../ui";

const RUN_FILTERS = statusOptions(["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const);

const EXAMPLE = JSON.stringify(
  {
    name: "Notify on order",
    trigger: { type: "event", event_type: "order.created" },
    steps: [{ id: "notify", type: "http", method: "POST", url: "https://example.com/hook", body: { order: "{{input.id}}" } }],
  },
  null,
  2,
);

const startedBy = (r: Run) =>
  r.trigger.type === "event" ? <a href={href("events", r.trigger.event_id ?? "")}>{r.trigger.event_type}</a> : "manual";

const triggerText = (wf: Workflow) => (wf.trigger.type === "event" ? `on ${wf.trigger.event_type}` : "manual");

export function WorkflowsPage() {
  const { can, identity } = useAccount();
  const [page, setPage] = useState(1);
  const list = useApi<Workflow[]>("/workflows", { page, per_page: 20 });
  const [creating, setCreating] = useState(false);
  // The new workflow's signing secret, shown once before its page opens.
  const [created, setCreated] = useState<WorkflowWithSecret | null>(null);
  return (
    <section aria-labelledby="workflows-title">
      <header class="page-head">
        <h2 id="workflows-title">Workflows</h2>
        {can("workflows:write") && !creating && !created && (
          <button type="button" onClick={() => setCreating(true)}>
            New workflow
          </button>
        )}
      </header>
      {creating && (
        <CreateWorkflow
          onCancel={() => setCreating(false)}
          onCreated={(wf) => {
            setCreating(false);
            if (wf.signing_secret) setCreated(wf);
            else location.hash = href("workflows", wf.id);
          }}
        />
      )}
      {created && (
        <SecretOnce
          label={`Signing secret of “${created.name}”`}
          value={created.signing_secret}
          onDone={() => {
            setCreated(null);
            location.hash = href("workflows", created.id);
          }}
        />
      )}
      <ListOf
        state={list}
        what="workflows"
        empty={`No workflows in ${identity.environment} yet.`}
        onPage={setPage}
        columns={[
          { title: "Name", cell: (wf) => <a href={href("workflows", wf.id)}>{wf.name}</a> },
          { title: "Trigger", cell: triggerText },
          { title: "Steps", cell: (wf) => wf.steps.length },
          { title: "Status", cell: (wf) => <Status value={wf.status} /> },
          { title: "Version", cell: (wf) => `v${wf.version}` },
          { title: "Updated", cell: (wf) => <Time at={wf.updated_at} /> },
        ]}
      />
    </section>
  );
}

function CreateWorkflow({ onCreated, onCancel }: { onCreated(wf: WorkflowWithSecret): void; onCancel(): void }) {
  const { key } = useAccount();
  const definition = useJsonText(EXAMPLE);
  const create = useAction((body: unknown) => call<WorkflowWithSecret>(key, "POST", "/workflows", body));
  return (
    <form
      class="panel"
      aria-labelledby="create-workflow-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const body = definition.parse();
        if (body === undefined) return;
        const wf = await create.go(body);
        if (wf) onCreated(wf);
      }}
    >
      <h3 id="create-workflow-title">New workflow</h3>
      <JsonField
        label="Definition (JSON: name, trigger, steps)"
        name="definition"
        rows={12}
        json={definition}
        invalid={create.error !== null}
      />
      <ErrorNotice error={create.error} />
      <div class="actions">
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" aria-busy={create.pending} disabled={create.pending}>
          Create workflow
        </button>
      </div>
    </form>
  );
}

export function WorkflowPage({ id }: { id: string }) {
  const { key, can } = useAccount();
  const wf = useApi<Workflow>(`/workflows/${encodeURIComponent(id)}`);
  const [status, setStatus] = useState<keyof typeof RUN_FILTERS>("all");
  const [page, setPage] = useState(1);
  const runs = useApi<Run[]>(
    `/workflows/${encodeURIComponent(id)}/runs`,
    { page, per_page: 20, status: status === "all" ? undefined : status },
    3000,
  );
  const input = useJsonText("{}");
  const start = useAction((parsed: unknown) => call<Run>(key, "POST", `/workflows/${encodeURIComponent(id)}/runs`, { input: parsed }));
  const rotation = useSecretRotation({
    rotate: () => call<WorkflowWithSecret>(key, "POST", `/workflows/${encodeURIComponent(id)}/rotate-secret`),
    secretOf: (wf) => wf.signing_secret,
    signs:
      "Step requests are signed with the new secret and, for 24 hours, also with the old one, so receivers can switch without refusing any.",
    action: "Rotate signing secret",
  });

  return (
    <section aria-labelledby="workflow-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("workflows")}>Workflows</a> / <span>{id}</span>
      </nav>
      <Loaded state={wf} what="the workflow">
        {(w) => (
          <>
            <header class="page-head">
              <h2 id="workflow-title">{w.name}</h2>
              <Status value={w.status} />
            </header>
            {w.description && <p>{w.description}</p>}
            <dl class="facts">
              <dt>ID</dt>
              <dd>
                <code>{w.id}</code>
              </dd>
              <dt>Trigger</dt>
              <dd>{triggerText(w)}</dd>
              <dt>Version</dt>
              <dd>v{w.version}</dd>
              <dt>Updated</dt>
              <dd>
                <Time at={w.updated_at} />
              </dd>
            </dl>
            <h3>Steps</h3>
            <ol class="steps">
              {w.steps.map((s) => (
                <li key={s.id}>
                  <code>{s.id}</code> <span class="chip">{s.type}</span> <span class="muted break">{stepSummary(s)}</span>
                </li>
              ))}
            </ol>
            {can("workflows:write") && (
              <div class="actions left">
                <button type="button" class="outline secondary" onClick={rotation.begin}>
                  Rotate signing secret
                </button>
              </div>
            )}
            <ErrorNotice error={rotation.error} />
          </>
        )}
      </Loaded>
      {rotation.dialogs}

      {can("workflows:write") ? (
        <form
          class="panel inline-form"
          aria-labelledby="start-title"
          onSubmit={async (e) => {
            e.preventDefault();
            const parsed = input.parse();
            if (parsed === undefined) return;
            const run = await start.go(parsed);
            if (run) location.hash = href("workflows", id, "runs", run.id);
          }}
        >
          <h3 id="start-title">Start a run</h3>
          <JsonField label="Input (JSON object)" name="input" rows={3} json={input} invalid={start.error?.param === "input"} />
          <ErrorNotice error={start.error} />
          <button type="submit" aria-busy={start.pending} disabled={start.pending}>
            Start run
          </button>
        </form>
      ) : (
        <NeedsScope scope="workflows:write" />
      )}

      <section aria-labelledby="runs-title">
        <header class="page-head">
          <h3 id="runs-title">Runs</h3>
          <div class="filters">
            <Choice label="Status" name="run-status" value={status} options={RUN_FILTERS} onChange={(s) => (setStatus(s), setPage(1))} />
            <button type="button" class="outline secondary small" onClick={runs.reload}>
              Refresh
            </button>
          </div>
        </header>
        <ListOf
          state={runs}
          what="runs"
          empty={status === "all" ? "No runs yet." : `No ${status} runs.`}
          onPage={setPage}
          columns={[
            { title: "Run", cell: (r) => <a href={href("workflows", id, "runs", r.id)}>{r.id}</a> },
            { title: "Status", cell: (r) => <Status value={r.status} /> },
            { title: "Started by", cell: startedBy },
            { title: "Created", cell: (r) => <Time at={r.created_at} /> },
            { title: "Finished", cell: (r) => <Time at={r.finished_at} /> },
          ]}
        />
      </section>
    </section>
  );
}

function stepSummary(step: Workflow["steps"][number]): string {
  switch (step.type) {
    case "http":
      return `${String(step.method ?? "POST")} ${String(step.url)}`;
    case "delay":
      return `${Number(step.duration_ms) / 1000} s`;
    case "approval":
      return String(step.message ?? "");
    case "emit":
      return String(step.event_type);
    default:
      return "";
  }
}

/** The key that did something, by name (and id, to tell keys of one name apart). */
const actorText = (a: Actor) => `${a.key_name ?? "a key"} (${a.key_id})`;

/** What the server takes as an approval's comment, at most. */
const COMMENT_MAX = 1000;

function DecisionNote({ decision: d }: { decision: ApprovalDecision }) {
  return (
    <p class="decision" role="note">
      {d.decision === "approved" ? "Approved" : "Rejected"} by <strong>{actorText(d.decided_by)}</strong> <Time at={d.decided_at} />
      {d.comment && <q class="break">{d.comment}</q>}
    </p>
  );
}

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
  const pending = current?.status === "waiting" ? current.pending_approval : null;
  const waitingApproval = pending !== null && pending !== undefined;
  // A rejection is a decision, not a fault: it is rerun, not retried.
  const retryable = current?.status === "failed" && !current.steps.some((s) => s.decision?.decision === "rejected");

  return (
    <section aria-labelledby="run-title">
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
            {r.status === "waiting" && r.pending_approval && (
              <div class="notice wait" role="status">
                This run waits for approval at step <code>{r.pending_approval.step_id}</code>
                {r.pending_approval.message !== null && (
                  <>
                    : <q class="break">{r.pending_approval.message}</q>
                  </>
                )}
              </div>
            )}
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
            <h3>Steps</h3>
            <ol class="run-steps">
              {r.steps.map((s) => (
                <li key={s.id} class={`run-step ${s.status}`} aria-label={`Step ${s.id}: ${s.status}`}>
                  <header>
                    <code>{s.id}</code> <span class="chip">{s.type}</span> <Status value={s.status} />
                    {s.attempt_count > 1 && <small class="muted"> {s.attempt_count} attempts</small>}
                    <small class="muted right">
                      <Time at={s.started_at} /> → <Time at={s.finished_at} />
                    </small>
                  </header>
                  {s.type === "approval" && s.message !== undefined && s.message !== null && (
                    <p class="muted break">
                      Asked: <q>{s.message}</q>
                    </p>
                  )}
                  {s.decision && <DecisionNote decision={s.decision} />}
                  {s.error && (
                    <p class="step-error" role="note">
                      {s.error}
                    </p>
                  )}
                  {s.output !== null && s.output !== undefined && (
                    <details>
                      <summary>Output</summary>
                      <Json value={s.output} label={`Output of step ${s.id}`} />
                    </details>
                  )}
                </li>
              ))}
            </ol>
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
