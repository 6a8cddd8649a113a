import { useState } from "preact/hooks";
import type { Run } from "../../api";
import { href } from "../../session";
import { Choice, ListOf, Status, Time, statusOptions, useApi } from "../../ui";

const FILTERS = statusOptions(["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const);

/** A run's child runs (`GET /runs?parent_run_id=`), newest first, 50 a page, by status: each opens its own page. */
export function ChildrenPage({ workflowId, runId }: { workflowId: string; runId: string }) {
  const [status, setStatus] = useState<keyof typeof FILTERS>("all");
  const [page, setPage] = useState(1);
  const children = useApi<Run[]>(
    "/runs",
    { parent_run_id: runId, page, per_page: 50, status: status === "all" ? undefined : status },
    3000,
  );
  return (
    <section aria-labelledby="children-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("workflows")}>Workflows</a> / <a href={href("workflows", workflowId)}>{workflowId}</a> /{" "}
        <a href={href("workflows", workflowId, "runs", runId)}>{runId}</a> / <span>children</span>
      </nav>
      <header class="page-head">
        <h2 id="children-title">
          Child runs of <code>{runId}</code>
        </h2>
        <div class="filters">
          <Choice label="Status" name="child-status" value={status} options={FILTERS} onChange={(s) => (setStatus(s), setPage(1))} />
        </div>
      </header>
      <ListOf
        state={children}
        what="child runs"
        empty={status === "all" ? "No child runs." : `No ${status} child runs.`}
        onPage={setPage}
        columns={[
          { title: "Run", cell: (c) => <a href={href("workflows", c.workflow_id, "runs", c.id)}>{c.id}</a> },
          { title: "Step", cell: (c) => <code>{c.parent?.step_id}</code> },
          { title: "Index", cell: (c) => c.parent?.index },
          { title: "Status", cell: (c) => <Status value={c.status} /> },
          { title: "Created", cell: (c) => <Time at={c.created_at} /> },
          { title: "Finished", cell: (c) => <Time at={c.finished_at} /> },
        ]}
      />
    </section>
  );
}
