import { useState } from "preact/hooks";
import { BULK_ACTIONS, RUN_STATUSES } from "../../../../shared/api/wire";
import { call, type BulkAction, type BulkJob, type BulkJobFilter } from "../../api";
import { href } from "../../session";
import { Choice, ErrorNotice, FieldError, ListOf, NeedsScope, Status, Time, useAccount, useAction, useApi } from "../../ui";
import { BulkProgress } from "./bulk-job";
import { bulkFilterText } from "./runs.logic";

const ACTIONS = Object.fromEntries(BULK_ACTIONS.map((a) => [a, a])) as Record<BulkAction, string>;
const STATUSES = Object.fromEntries([["any", "any it applies to"], ...RUN_STATUSES.map((s) => [s, s])]) as Record<string, string>;

/** Bulk jobs on runs (GET /runs/bulk), newest first, with their progress; a new one from a filter. */
export function BulkJobsPage() {
  const { can } = useAccount();
  const [page, setPage] = useState(1);
  const jobs = useApi<BulkJob[]>("/runs/bulk", { page, per_page: 20 }, 2000);
  const [creating, setCreating] = useState(false);
  return (
    <section aria-labelledby="bulk-title">
      <header class="page-head">
        <h2 id="bulk-title">Bulk jobs</h2>
        {can("workflows:write") && !creating && (
          <button type="button" onClick={() => setCreating(true)}>
            New bulk job
          </button>
        )}
      </header>
      {!can("workflows:write") && <NeedsScope scope="workflows:write" />}
      {creating && <NewBulkJob onCancel={() => setCreating(false)} />}
      <ListOf
        state={jobs}
        what="bulk jobs"
        empty="No bulk jobs in this environment yet."
        onPage={setPage}
        columns={[
          { title: "Job", cell: (j) => <a href={href("bulk", j.id)}>{j.id}</a> },
          { title: "Action", cell: (j) => <span class="chip">{j.action}</span> },
          { title: "Runs", cell: (j) => <span class="break">{bulkFilterText(j.filter)}</span> },
          { title: "Status", cell: (j) => <Status value={j.status} /> },
          { title: "Progress", cell: (j) => <BulkProgress job={j} /> },
          { title: "Created", cell: (j) => <Time at={j.created_at} /> },
        ]}
      />
    </section>
  );
}

/** POST /runs/bulk: an action and a filter (a workflow or a time range at least, as the API asks). */
function NewBulkJob({ onCancel }: { onCancel(): void }) {
  const { key } = useAccount();
  const [action, setAction] = useState<BulkAction>("retry");
  const [status, setStatus] = useState("any");
  const [fields, setFields] = useState({ workflow_id: "", failed_step: "", created_after: "", created_before: "" });
  const start = useAction((body: unknown) => call<BulkJob>(key, "POST", "/runs/bulk", body));
  const field = (name: keyof typeof fields, label: string, placeholder: string) => (
    <label>
      {label}
      <input
        name={name}
        value={fields[name]}
        placeholder={placeholder}
        onInput={(e) => setFields({ ...fields, [name]: e.currentTarget.value })}
        aria-invalid={start.error?.param === `filter.${name}` || undefined}
      />
      <FieldError error={start.error} param={`filter.${name}`} />
    </label>
  );
  return (
    <form
      class="panel"
      aria-labelledby="new-bulk-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const filter: BulkJobFilter = Object.fromEntries(
          Object.entries(fields)
            .filter(([, v]) => v.trim() !== "")
            .map(([k, v]) => [k, v.trim()]),
        );
        if (status !== "any") filter.status = status as BulkJobFilter["status"];
        const job = await start.go({ action, filter });
        if (job) location.hash = href("bulk", job.id);
      }}
    >
      <h3 id="new-bulk-title">New bulk job</h3>
      <div class="grid">
        <Choice label="Action" name="action" value={action} options={ACTIONS} onChange={setAction} />
        <Choice label="Status" name="status" value={status} options={STATUSES} onChange={setStatus} />
      </div>
      <div class="grid">
        {field("workflow_id", "Workflow id", "wf_…")}
        {field("failed_step", "Failed at step", "step id (retry, rerun)")}
      </div>
      <div class="grid">
        {field("created_after", "Created from", "2026-11-27T00:00:00Z")}
        {field("created_before", "Created before", "2026-11-28T00:00:00Z")}
      </div>
      <ErrorNotice error={start.error} />
      <div class="actions">
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" aria-busy={start.pending} disabled={start.pending}>
          Start bulk job
        </button>
      </div>
    </form>
  );
}
