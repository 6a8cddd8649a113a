import { useState } from "preact/hooks";
import { call, type Run, type Workflow, type WorkflowWithSecret } from "../../api";
import { href } from "../../session";
import {
  Choice,
  ErrorNotice,
  JsonField,
  ListOf,
  Loaded,
  NeedsScope,
  Status,
  Time,
  statusOptions,
  useAccount,
  useAction,
  useApi,
  useJsonText,
  useSecretRotation,
} from "../../ui";
import { hookText, startedBy, triggerText } from "./common";
import { GraphView } from "./graph-view";
import { graphOf } from "./graph.logic";
import { TriggerSections } from "./trigger-sections";

const RUN_FILTERS = statusOptions(["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const);

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
              {w.hook && (
                <>
                  <dt>Hook</dt>
                  <dd class="break">{hookText(w)}</dd>
                </>
              )}
              <dt>Version</dt>
              <dd>v{w.version}</dd>
              <dt>Updated</dt>
              <dd>
                <Time at={w.updated_at} />
              </dd>
            </dl>
            <h3>Steps</h3>
            <GraphView graph={graphOf(w.steps)} label="Workflow graph" />
            {can("workflows:write") && (
              <div class="actions left">
                <button type="button" class="outline secondary" onClick={rotation.begin}>
                  Rotate signing secret
                </button>
              </div>
            )}
            <ErrorNotice error={rotation.error} />
            <TriggerSections workflow={w} />
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
