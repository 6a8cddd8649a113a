import { useState } from "preact/hooks";
import { RUN_STATUSES } from "../../../../shared/api/wire";
import type { Run } from "../../api";
import { href } from "../../session";
import { Choice, ListOf, Status, Time, statusOptions, useApi } from "../../ui";
import { startedBy } from "../workflows/common";
import { waitText } from "./runs.logic";

const STATUSES = statusOptions(RUN_STATUSES);
type Filter = keyof typeof STATUSES;

/** The route of the list by `status` ("all": any), of one workflow's runs when `workflowId` is given. */
const routeOf = (status: Filter, workflowId?: string) =>
  workflowId ? href("runs", status, workflowId) : status === "all" ? href("runs") : href("runs", status);

/**
 * Every workflow's runs (GET /runs), newest first, by status and workflow (`#/runs/<status>/<workflow id>`):
 * `#/runs/queued` lists the runs that wait, each with why (`queued_reason`) and the flow-control
 * key it waits under (`flow_key`).
 */
export function RunsPage({ status, workflowId }: { status?: string; workflowId?: string }) {
  const filter: Filter = status !== undefined && status in STATUSES ? (status as Filter) : "all";
  const [page, setPage] = useState(1);
  const [workflowText, setWorkflowText] = useState(workflowId ?? "");
  const runs = useApi<Run[]>("/runs", { page, per_page: 25, status: filter === "all" ? undefined : filter, workflow_id: workflowId }, 3000);
  return (
    <section aria-labelledby="runs-title">
      <header class="page-head">
        <h2 id="runs-title">{filter === "queued" ? "Queued runs" : "Runs"}</h2>
        <div class="filters">
          <Choice
            label="Status"
            name="runs-status"
            value={filter}
            options={STATUSES}
            onChange={(s) => (location.hash = routeOf(s, workflowId))}
          />
          <form
            aria-label="Runs of one workflow"
            onSubmit={(e) => {
              e.preventDefault();
              location.hash = routeOf(filter, workflowText.trim() || undefined);
            }}
          >
            <label>
              Workflow
              <input
                name="workflow_id"
                value={workflowText}
                placeholder="wf_… (every workflow)"
                onInput={(e) => setWorkflowText(e.currentTarget.value)}
              />
            </label>
          </form>
          <button type="button" class="outline secondary small" onClick={runs.reload}>
            Refresh
          </button>
        </div>
      </header>
      {filter === "queued" && (
        <p class="muted">
          Runs held by their workflow's concurrency, throttle or debounce, or by the environment's runs per minute. Each starts on its own,
          oldest first, once its key has room.
        </p>
      )}
      <ListOf
        state={runs}
        what="runs"
        empty={`${filter === "all" ? "No runs" : `No ${filter} runs`}${workflowId ? ` of ${workflowId}` : ""}.`}
        onPage={setPage}
        columns={[
          {
            title: "Run",
            cell: (r) => (
              <>
                <a href={href("workflows", r.workflow_id, "runs", r.id)}>{r.id}</a>
                <br />
                <small>
                  of <a href={href("workflows", r.workflow_id)}>{r.workflow_id}</a>
                </small>
              </>
            ),
          },
          { title: "Status", cell: (r) => <Status value={r.status} /> },
          {
            title: "Waits because",
            cell: (r) => {
              const why = waitText(r);
              return why ? (
                <>
                  {r.queued_reason && <span class="chip">{r.queued_reason}</span>} {why}
                </>
              ) : (
                <span class="muted">—</span>
              );
            },
          },
          {
            title: "Flow key",
            cell: (r) =>
              typeof r.flow_key === "string" ? <code class="nowrap">{JSON.stringify(r.flow_key)}</code> : <span class="muted">—</span>,
          },
          { title: "Started by", cell: startedBy },
          { title: "Created", cell: (r) => <Time at={r.created_at} /> },
        ]}
      />
    </section>
  );
}
