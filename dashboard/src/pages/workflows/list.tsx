import { useState } from "preact/hooks";
import { call, type Workflow, type WorkflowWithSecret } from "../../api";
import { href } from "../../session";
import { ErrorNotice, JsonField, ListOf, SecretOnce, Status, Time, useAccount, useAction, useApi, useJsonText } from "../../ui";
import { triggerText } from "./common";

const EXAMPLE = JSON.stringify(
  {
    name: "Notify on order",
    trigger: { type: "event", event_type: "order.created" },
    steps: [{ id: "notify", type: "http", method: "POST", url: "https://example.com/hook", body: { order: "{{input.id}}" } }],
  },
  null,
  2,
);

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
      {created?.signing_secret && (
        <SecretOnce
          label={`Signing secret of “${created.name}”`}
          value={created.signing_secret}
          onDone={() => {
            // A webhook trigger's hook secret next, shown once too.
            if (created.hook_secret) return setCreated({ ...created, signing_secret: "" });
            setCreated(null);
            location.hash = href("workflows", created.id);
          }}
        />
      )}
      {created && !created.signing_secret && created.hook_secret && (
        <SecretOnce
          label={`Hook secret of “${created.name}” (POST ${created.hook?.url ?? ""})`}
          value={created.hook_secret}
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
