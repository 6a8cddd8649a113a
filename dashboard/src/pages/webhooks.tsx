import { useState } from "preact/hooks";
import { DELIVERY_STATUSES } from "../../../shared/api/wire";
import { call, type Attempt, type Delivery, type DeliveryDetail, type Recovery, type Webhook, type WebhookWithSecret } from "../api";
import { href } from "../session";
import {
  Choice,
  DataTable,
  Empty,
  ErrorNotice,
  FieldError,
  ListOf,
  Loaded,
  NeedsScope,
  Pager,
  SecretOnce,
  Status,
  Time,
  statusOptions,
  useAccount,
  useAction,
  useApi,
  useSecretRotation,
} from "../ui";

export function WebhooksPage() {
  const { can, identity } = useAccount();
  const [page, setPage] = useState(1);
  const list = useApi<Webhook[]>("/webhooks", { page, per_page: 20 });
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<WebhookWithSecret | null>(null);

  return (
    <section aria-labelledby="webhooks-title">
      <header class="page-head">
        <h2 id="webhooks-title">Webhooks</h2>
        {can("webhooks:write") && !creating && (
          <button type="button" onClick={() => (setCreating(true), setCreated(null))}>
            Add endpoint
          </button>
        )}
      </header>
      {creating && (
        <CreateWebhook
          onCancel={() => setCreating(false)}
          onCreated={(wh) => {
            setCreating(false);
            setCreated(wh);
            setPage(1);
            list.reload();
          }}
        />
      )}
      {created?.secret && <SecretOnce label={`Signing secret of ${created.url}`} value={created.secret} onDone={() => setCreated(null)} />}
      <ListOf
        state={list}
        what="webhooks"
        empty={`No webhook endpoints in ${identity.environment} yet. Add one to receive signed events.`}
        onPage={setPage}
        columns={[
          {
            title: "Endpoint",
            cell: (wh) => (
              <>
                <a href={href("webhooks", wh.id)}>{wh.url}</a>
                {wh.description && <small class="muted block">{wh.description}</small>}
              </>
            ),
          },
          {
            title: "Events",
            cell: (wh) =>
              wh.events.map((t) => (
                <code class="chip" key={t}>
                  {t}
                </code>
              )),
          },
          { title: "Status", cell: (wh) => <Health webhook={wh} /> },
          { title: "Created", cell: (wh) => <Time at={wh.created_at} /> },
        ]}
      />
    </section>
  );
}

/** The status, unless its attempts are failing: then that ("failing: 12 in a row, 0 % 24 h"), never a green "enabled". */
function Health({ webhook: wh }: { webhook: Webhook }) {
  const h = wh.health;
  const rate = h?.success_rate_24h;
  const share = rate === null || rate === undefined ? "no attempts in 24 h" : `${Math.round(rate * 1000) / 10} % 24 h`;
  if (wh.status !== "enabled" || !h || (h.consecutive_failed_attempts === 0 && (rate ?? 1) >= 0.5)) {
    return (
      <span data-health={wh.status}>
        <Status value={wh.status} />
        {h?.last_attempt && <small class="muted block">{share}</small>}
      </span>
    );
  }
  const failing = h.consecutive_failed_attempts > 0;
  return (
    <span
      data-health={failing ? "failing" : "degraded"}
      title={h.last_attempt ? `last attempt ${h.last_attempt.at}: ${h.last_attempt.status_code ?? "no answer"}` : undefined}
    >
      <span class="status bad">{failing ? `failing: ${h.consecutive_failed_attempts} in a row, ${share}` : `degraded: ${share}`}</span>
    </span>
  );
}

function CreateWebhook({ onCreated, onCancel }: { onCreated(wh: WebhookWithSecret): void; onCancel(): void }) {
  const { key } = useAccount();
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState("*");
  const [description, setDescription] = useState("");
  const types = useApi<{ type: string }[]>("/events/types", { per_page: 100 });
  const create = useAction(() =>
    call<WebhookWithSecret>(key, "POST", "/webhooks", {
      url: url.trim(),
      events: events
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean),
      ...(description.trim() && { description: description.trim() }),
    }),
  );
  return (
    <form
      class="panel"
      aria-labelledby="create-webhook-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const wh = await create.go();
        if (wh) onCreated(wh);
      }}
    >
      <h3 id="create-webhook-title">New webhook endpoint</h3>
      <label>
        Endpoint URL
        <input
          type="url"
          name="url"
          required
          placeholder="https://example.com/webhooks"
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          aria-invalid={create.error?.param === "url" || undefined}
          aria-describedby="url-error"
        />
        <FieldError error={create.error} param="url" />
      </label>
      <label>
        Event types
        <input
          name="events"
          required
          list="event-types"
          value={events}
          onInput={(e) => setEvents(e.currentTarget.value)}
          aria-describedby="events-help events-error"
          aria-invalid={create.error?.param?.startsWith("events") || undefined}
        />
        <small id="events-help">Comma-separated, or * for every type.</small>
        <FieldError error={create.error} param="events" />
        <datalist id="event-types">
          {(types.data ?? []).map((t) => (
            <option key={t.type} value={t.type} />
          ))}
        </datalist>
      </label>
      <label>
        Description (optional)
        <input name="description" maxLength={500} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </label>
      {create.error && !["url", "events"].includes(create.error.param ?? "") && <ErrorNotice error={create.error} />}
      <div class="actions">
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" aria-busy={create.pending} disabled={create.pending}>
          Add endpoint
        </button>
      </div>
    </form>
  );
}

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

/** Headers as a definition list. */
function Headers({ headers }: { headers: Record<string, string> }) {
  return (
    <dl class="headers">
      {Object.entries(headers).map(([name, value]) => (
        <>
          <dt key={`${name}:`}>
            <code>{name}</code>
          </dt>
          <dd key={name} class="break">
            <code>{value}</code>
          </dd>
        </>
      ))}
    </dl>
  );
}

/** One attempt's request and answer, as the full delivery shows them. */
function AttemptDetail({ attempt: a }: { attempt: Attempt }) {
  return (
    <div class="attempt" data-attempt={a.number}>
      <h4>
        Attempt {a.number} · {a.status_code ?? "no answer"} · <Time at={a.at} />
      </h4>
      {a.request ? (
        <>
          <p class="break">
            <strong>Request</strong> {a.request.method} <code>{a.request.url}</code> ({a.request.body_bytes} bytes)
          </p>
          <Headers headers={a.request.headers} />
        </>
      ) : (
        <p class="muted">Nothing sent{a.error ? `: ${a.error}` : ""}.</p>
      )}
      {a.response ? (
        <>
          <p>
            <strong>Response</strong> HTTP {a.status_code} · {a.duration_ms} ms · {a.response.body_bytes} bytes
            {a.response.body_truncated ? " (first 4 KiB shown)" : ""}
            {a.response.body_encoding === "base64" ? " · not UTF-8, shown as base64" : ""}
          </p>
          <Headers headers={a.response.headers} />
          <pre class="response-body">{a.response.body}</pre>
        </>
      ) : (
        a.request && <p class="muted">No answer: {a.error}</p>
      )}
    </div>
  );
}

/** The delivery in full (the list has each attempt's summary): every attempt's request and answer, and the body sent. */
function DeliveryAttempts({ path }: { path: string }) {
  const full = useApi<DeliveryDetail>(path);
  return (
    <Loaded state={full} what="the delivery's attempts">
      {(detail) => (
        <>
          {detail.attempts.map((a) => (
            <AttemptDetail key={a.number} attempt={a} />
          ))}
          <p>
            <strong>Body sent</strong>
          </p>
          <pre class="request-body">{detail.payload ? JSON.stringify(detail.payload, null, 2) : "The event is no longer stored."}</pre>
        </>
      )}
    </Loaded>
  );
}

function DeliveryItem({ webhookId, delivery: d, onChanged }: { webhookId: string; delivery: Delivery; onChanged(): void }) {
  const { key, can } = useAccount();
  const [open, setOpen] = useState(false);
  const path = `/webhooks/${encodeURIComponent(webhookId)}/deliveries/${encodeURIComponent(d.id)}`;
  // The list has each attempt's summary; the delivery in full once opened.
  const redeliver = useAction(() => call<Delivery>(key, "POST", `${path}/${d.status === "pending" ? "retry" : "redeliver"}`));
  const last = d.attempts[d.attempts.length - 1];
  return (
    <li class="delivery" data-delivery={d.id} data-status={d.status}>
      <details onToggle={(e) => setOpen(e.currentTarget.open)}>
        <summary>
          <Status value={d.status} /> <code>{d.event_type}</code> {d.test && <span class="chip">test</span>}{" "}
          <span class="muted">{d.event_id}</span>
          <span class="right muted">
            {d.attempts.length} attempt{d.attempts.length === 1 ? "" : "s"}
            {last?.status_code ? ` · HTTP ${last.status_code}` : ""} · <Time at={d.created_at} />
          </span>
        </summary>
        {d.attempts.length === 0 ? (
          <p class="muted">Not attempted yet.</p>
        ) : (
          <DataTable
            caption={`Attempts of ${d.id}`}
            rows={d.attempts}
            rowKey={(a) => a.number}
            columns={[
              { title: "#", cell: (a) => a.number },
              { title: "At", cell: (a) => <Time at={a.at} /> },
              { title: "Status code", cell: (a) => a.status_code ?? "—" },
              { title: "Duration", cell: (a) => (a.duration_ms === null ? "—" : `${a.duration_ms} ms`) },
              { title: "Error", class: "break", cell: (a) => a.error ?? "" },
            ]}
          />
        )}
        {/* Read again whenever the list shows the delivery changed. */}
        {open && <DeliveryAttempts key={d.updated_at} path={path} />}
        <p class="muted small">
          {d.id}
          {d.next_attempt_at && (
            <>
              {" "}
              · next attempt <Time at={d.next_attempt_at} />
            </>
          )}
        </p>
        {can("webhooks:write") && (
          <button
            type="button"
            class="outline small"
            aria-busy={redeliver.pending}
            disabled={redeliver.pending}
            onClick={async () => (await redeliver.go()) && onChanged()}
          >
            {d.status === "pending" ? "Retry now" : "Redeliver"}
          </button>
        )}
        <ErrorNotice error={redeliver.error} />
      </details>
    </li>
  );
}
