import { useState } from "preact/hooks";
import { call, type PlatformEvent } from "../../api";
import { href } from "../../session";
import { EventDeliveries } from "./deliveries";
import { ErrorNotice, FieldError, Json, JsonField, ListOf, Loaded, Time, useAccount, useAction, useApi, useJsonText } from "../../ui";

export function EventsPage() {
  const { can, identity } = useAccount();
  const [page, setPage] = useState(1);
  const [type, setType] = useState("");
  const [typeFilter, setTypeFilter] = useState("");
  const [emitting, setEmitting] = useState(false);
  const [emitted, setEmitted] = useState<PlatformEvent | null>(null);
  const list = useApi<PlatformEvent[]>("/events", { page, per_page: 25, type: typeFilter || undefined });
  const types = useApi<{ type: string; system: boolean }[]>("/events/types", { per_page: 100 });

  return (
    <section aria-labelledby="events-title">
      <header class="page-head">
        <h2 id="events-title">Events</h2>
        <div class="head-actions">
          <a href={href("events", "types")}>Event catalog</a>
          {can("events:write") && !emitting && (
            <button type="button" onClick={() => (setEmitting(true), setEmitted(null))}>
              Send event
            </button>
          )}
        </div>
      </header>
      {emitting && (
        <EmitEvent
          onCancel={() => setEmitting(false)}
          onEmitted={(evt) => {
            setEmitting(false);
            setEmitted(evt);
            setPage(1);
            list.reload();
            types.reload();
          }}
        />
      )}
      {emitted && (
        <p role="status" class="notice ok">
          Sent <a href={href("events", emitted.id)}>{emitted.id}</a> ({emitted.type}).
        </p>
      )}
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setPage(1);
          setTypeFilter(type.trim());
        }}
      >
        <label>
          Type
          <input
            name="type"
            list="known-types"
            placeholder="e.g. order.created"
            value={type}
            onInput={(e) => setType(e.currentTarget.value)}
          />
        </label>
        <datalist id="known-types">
          {(types.data ?? []).map((t) => (
            <option key={t.type} value={t.type} />
          ))}
        </datalist>
        <button type="submit" class="small">
          Filter
        </button>
        {typeFilter && (
          <button type="button" class="outline secondary small" onClick={() => (setType(""), setTypeFilter(""), setPage(1))}>
            Clear
          </button>
        )}
        <button type="button" class="outline secondary small" onClick={list.reload}>
          Refresh
        </button>
      </form>
      <ListOf
        state={list}
        what="events"
        empty={typeFilter ? `No ${typeFilter} events in ${identity.environment}.` : `No events in ${identity.environment} yet.`}
        onPage={setPage}
        columns={[
          { title: "Event", cell: (evt) => <a href={href("events", evt.id)}>{evt.id}</a> },
          { title: "Type", cell: (evt) => <code>{evt.type}</code> },
          { title: "Source", cell: (evt) => evt.source },
          { title: "Created", cell: (evt) => <Time at={evt.created_at} /> },
        ]}
      />
    </section>
  );
}

function EmitEvent({ onEmitted, onCancel }: { onEmitted(evt: PlatformEvent): void; onCancel(): void }) {
  const { key } = useAccount();
  const [type, setType] = useState("");
  const data = useJsonText("{}");
  const emit = useAction((parsed: unknown) => call<PlatformEvent>(key, "POST", "/events", { type: type.trim(), data: parsed }));
  return (
    <form
      class="panel"
      aria-labelledby="emit-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const parsed = data.parse();
        if (parsed === undefined) return;
        const evt = await emit.go(parsed);
        if (evt) onEmitted(evt);
      }}
    >
      <h3 id="emit-title">Send an event</h3>
      <label>
        Type
        <input
          name="type"
          required
          placeholder="order.created"
          value={type}
          onInput={(e) => setType(e.currentTarget.value)}
          aria-invalid={emit.error?.param === "type" || undefined}
          aria-describedby="type-error"
        />
        <FieldError error={emit.error} param="type" />
      </label>
      <JsonField label="Data (JSON object)" name="data" rows={6} json={data} invalid={emit.error?.param === "data"} />
      {emit.error && !["type"].includes(emit.error.param ?? "") && <ErrorNotice error={emit.error} />}
      <div class="actions">
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" aria-busy={emit.pending} disabled={emit.pending}>
          Send event
        </button>
      </div>
    </form>
  );
}

export function EventPage({ id }: { id: string }) {
  const evt = useApi<PlatformEvent>(`/events/${encodeURIComponent(id)}`);
  return (
    <section aria-labelledby="event-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("events")}>Events</a> / <span>{id}</span>
      </nav>
      <Loaded state={evt} what="the event">
        {(e) => (
          <>
            <header class="page-head">
              <h2 id="event-title">
                <code>{e.type}</code>
              </h2>
            </header>
            <dl class="facts">
              <dt>ID</dt>
              <dd>
                <code>{e.id}</code>
              </dd>
              <dt>Source</dt>
              <dd>{e.source}</dd>
              <dt>Environment</dt>
              <dd>{e.environment}</dd>
              <dt>Created</dt>
              <dd>
                <Time at={e.created_at} />
              </dd>
            </dl>
            <h3>Deliveries</h3>
            <EventDeliveries eventId={e.id} />
            <h3>JSON</h3>
            <Json value={e} label={`JSON of ${e.id}`} />
          </>
        )}
      </Loaded>
    </section>
  );
}
