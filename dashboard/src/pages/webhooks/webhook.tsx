import { useState } from "preact/hooks";
import { DELIVERY_STATUSES } from "../../../../shared/api/wire";
import { call, type Delivery, type Recovery, type Webhook, type WebhookWithSecret } from "../../api";
import { href } from "../../session";
import {
  Choice,
  Empty,
  ErrorNotice,
  Loaded,
  NeedsScope,
  Pager,
  Status,
  Time,
  statusOptions,
  useAccount,
  useAction,
  useApi,
  useSecretRotation,
} from "../../ui";
import { DeliveryItem } from "./deliveries";

const DELIVERY_FILTERS = statusOptions(DELIVERY_STATUSES);

export function WebhookPage({ id }: { id: string }) {
  const { key, can } = useAccount();
  const hook = useApi<Webhook>(`/webhooks/${encodeURIComponent(id)}`);
  const [status, setStatus] = useState<keyof typeof DELIVERY_FILTERS>("all");
  const [page, setPage] = useState(1);
  const [live, setLive] = useState(true);
  const deliveries = useApi<Delivery[]>(
    `/webhooks/${encodeURIComponent(id)}/deliveries`,
    { page, per_page: 20, status: status === "all" ? undefined : status },
    live ? 2000 : undefined,
  );
  const toggle = useAction((next: "enabled" | "disabled") =>
    call<Webhook>(key, "PATCH", `/webhooks/${encodeURIComponent(id)}`, { status: next }),
  );
  const rotation = useSecretRotation({
    rotate: () => call<WebhookWithSecret>(key, "POST", `/webhooks/${encodeURIComponent(id)}/rotate-secret`),
    secretOf: (wh) => wh.secret,
    signs:
      "Deliveries are signed with the new secret and, for 24 hours, also with the old one, so your endpoint can switch without losing any.",
    action: "Rotate secret",
  });

  return (
    <section aria-labelledby="webhook-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("webhooks")}>Webhooks</a> / <span>{id}</span>
      </nav>
      <Loaded state={hook} what="the webhook">
        {(wh) => (
          <>
            <header class="page-head">
              <h2 id="webhook-title" class="break">
                {wh.url}
              </h2>
              <Status value={wh.status} />
            </header>
            <dl class="facts">
              <dt>ID</dt>
              <dd>
                <code>{wh.id}</code>
              </dd>
              <dt>Events</dt>
              <dd>
                {wh.events.map((t) => (
                  <code class="chip" key={t}>
                    {t}
                  </code>
                ))}
              </dd>
              {wh.description && (
                <>
                  <dt>Description</dt>
                  <dd>{wh.description}</dd>
                </>
              )}
              <dt>Created</dt>
              <dd>
                <Time at={wh.created_at} />
              </dd>
            </dl>
            {can("webhooks:write") ? (
              <div class="actions left">
                <button
                  type="button"
                  class="outline"
                  aria-busy={toggle.pending}
                  disabled={toggle.pending}
                  onClick={async () => (await toggle.go(wh.status === "enabled" ? "disabled" : "enabled")) && hook.reload()}
                >
                  {wh.status === "enabled" ? "Disable" : "Enable"}
                </button>
                <button type="button" class="outline secondary" onClick={rotation.begin}>
                  Rotate secret
                </button>
              </div>
            ) : (
              <NeedsScope scope="webhooks:write" />
            )}
            <ErrorNotice error={toggle.error ?? rotation.error} />
            {can("webhooks:write") && wh.status === "enabled" && <RecoverAndTest webhookId={id} onStarted={deliveries.reload} />}
          </>
        )}
      </Loaded>
      {rotation.dialogs}

      <section aria-labelledby="deliveries-title">
        <header class="page-head">
          <h3 id="deliveries-title">Delivery log</h3>
          <div class="filters">
            <Choice label="Status" name="status" value={status} options={DELIVERY_FILTERS} onChange={(s) => (setStatus(s), setPage(1))} />
            <label class="inline">
              <input type="checkbox" role="switch" checked={live} onChange={(e) => setLive(e.currentTarget.checked)} />
              Live updates
            </label>
            <button type="button" class="outline secondary small" onClick={deliveries.reload}>
              Refresh
            </button>
          </div>
        </header>
        <Loaded state={deliveries} what="deliveries">
          {(items) =>
            items.length === 0 ? (
              <Empty>
                {status === "all" ? "No deliveries yet: events this endpoint subscribes to will appear here." : `No ${status} deliveries.`}
              </Empty>
            ) : (
              <ul class="deliveries" aria-label="Deliveries">
                {items.map((d) => (
                  <DeliveryItem key={d.id} webhookId={id} delivery={d} onChanged={deliveries.reload} />
                ))}
              </ul>
            )
          }
        </Loaded>
        <Pager meta={deliveries.meta} onPage={setPage} />
      </section>
    </section>
  );
}

/** Sends a test event, and recovers the failed deliveries since a time, showing the job's progress. */
function RecoverAndTest({ webhookId, onStarted }: { webhookId: string; onStarted(): void }) {
  const { key } = useAccount();
  const base = `/webhooks/${encodeURIComponent(webhookId)}`;
  const [since, setSince] = useState(() => new Date(Date.now() - 24 * 3_600_000).toISOString().slice(0, 16));
  const [jobId, setJobId] = useState<string | null>(null);
  const recover = useAction(() => call<Recovery>(key, "POST", `${base}/recover`, { since: new Date(since).toISOString() }));
  const test = useAction(() => call<Delivery>(key, "POST", `${base}/test`, {}));
  const job = useApi<Recovery>(jobId === null ? null : `${base}/recover/${encodeURIComponent(jobId)}`, undefined, 1000);
  return (
    <div class="recover">
      <form
        class="inline"
        onSubmit={async (e) => {
          e.preventDefault();
          const started = await recover.go();
          if (started) {
            setJobId(started.id);
            onStarted();
          }
        }}
      >
        <label>
          Recover failed deliveries since
          <input type="datetime-local" name="since" value={since} onInput={(e) => setSince(e.currentTarget.value)} required />
        </label>
        <button type="submit" class="outline small" aria-busy={recover.pending} disabled={recover.pending}>
          Recover
        </button>
        <button type="button" class="outline secondary small" onClick={async () => (await test.go()) && onStarted()}>
          Send test event
        </button>
      </form>
      {job.data && (
        <p role="status" class="recovery" data-recovery={job.data.status}>
          Recovery {job.data.status === "running" ? "running" : "done"}: {job.data.done} of {job.data.total}
          {job.data.total_capped ? "+" : ""} redelivered <progress value={job.data.done} max={Math.max(job.data.total, 1)} />
        </p>
      )}
      <ErrorNotice error={recover.error ?? test.error} />
    </div>
  );
}
