import { useState } from "preact/hooks";
import { call, type Webhook, type WebhookWithSecret } from "../../api";
import { href } from "../../session";
import { ErrorNotice, FieldError, ListOf, SecretOnce, Status, Time, useAccount, useAction, useApi } from "../../ui";

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
