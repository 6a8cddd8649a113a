import { useState } from "preact/hooks";
import { call, type Attempt, type Delivery, type DeliveryDetail } from "../../api";
import { DataTable, ErrorNotice, Loaded, Status, Time, useAccount, useAction, useApi } from "../../ui";

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

export function DeliveryItem({ webhookId, delivery: d, onChanged }: { webhookId: string; delivery: Delivery; onChanged(): void }) {
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
