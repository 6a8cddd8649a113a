import { useEffect, useState } from "preact/hooks";
import { call, type BulkJob } from "../../api";
import { href } from "../../session";
import { Confirm, ErrorNotice, Loaded, Status, Time, useAccount, useAction, useApi } from "../../ui";
import { actorText } from "../workflows/common";
import { bulkFilterText, bulkProgress } from "./runs.logic";

/** A bar and a line: the runs handled of those in the job's range, and how many were matched, done and failed. */
export function BulkProgress({ job }: { job: BulkJob }) {
  const p = bulkProgress(job);
  return (
    <div class="bulk-progress">
      <progress value={p.value} max={p.max} aria-label={`Progress of ${job.id}`} />
      <small>{p.text}</small>
    </div>
  );
}

/** One bulk job (GET /runs/bulk/{job_id}), read again every second while it runs; Cancel stops it after the batch under way. */
export function BulkJobPage({ id }: { id: string }) {
  const { key, can } = useAccount();
  const path = `/runs/bulk/${encodeURIComponent(id)}`;
  const [ended, setEnded] = useState(false);
  const job = useApi<BulkJob>(path, undefined, ended ? undefined : 1000);
  const status = job.data?.status;
  useEffect(() => setEnded(status !== undefined && status !== "running"), [status]);
  const [confirming, setConfirming] = useState(false);
  const cancel = useAction(() => call<BulkJob>(key, "POST", `${path}/cancel`));
  return (
    <section aria-labelledby="bulk-job-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("bulk")}>Bulk jobs</a> / <span>{id}</span>
      </nav>
      <Loaded state={job} what="the bulk job">
        {(j) => (
          <>
            <header class="page-head">
              <h2 id="bulk-job-title">
                Bulk {j.action} <code>{j.id}</code>
              </h2>
              <Status value={j.status} />
            </header>
            <BulkProgress job={j} />
            <dl class="facts">
              <dt>Runs</dt>
              <dd class="break">{bulkFilterText(j.filter)}</dd>
              <dt>In range</dt>
              <dd>
                {j.total}
                {j.total_capped && " or more (counted up to 10,000)"}
              </dd>
              <dt>Matched</dt>
              <dd>{j.matched}</dd>
              <dt>Done</dt>
              <dd>{j.done}</dd>
              <dt>Failed</dt>
              <dd>{j.failed}</dd>
              {j.last_error && (
                <>
                  <dt>Last error</dt>
                  <dd class="break">{j.last_error}</dd>
                </>
              )}
              <dt>Started by</dt>
              <dd>{actorText(j.created_by)}</dd>
              <dt>Created</dt>
              <dd>
                <Time at={j.created_at} />
              </dd>
              <dt>Finished</dt>
              <dd>
                <Time at={j.finished_at} />
              </dd>
            </dl>
            {j.status === "running" && can("workflows:write") && (
              <div class="actions left">
                <button type="button" class="outline danger" onClick={() => setConfirming(true)}>
                  Cancel job
                </button>
              </div>
            )}
            <ErrorNotice error={cancel.error} />
          </>
        )}
      </Loaded>
      {confirming && (
        <Confirm
          title="Cancel this bulk job?"
          body={<p>The batch under way finishes; no other starts. Runs already acted on stay as they are.</p>}
          action="Cancel job"
          tone="danger"
          pending={cancel.pending}
          onCancel={() => setConfirming(false)}
          onConfirm={async () => {
            await cancel.go();
            setConfirming(false);
            job.reload();
          }}
        />
      )}
    </section>
  );
}
