import { useState } from "preact/hooks";
import type { EventType, PlatformEvent } from "../../api";
import { href } from "../../session";
import { Empty, Json, Loaded, Time, useAccount, useApi } from "../../ui";

/**
 * GET /events/types as a catalog: each type, what it means, and an example payload. The example is
 * the newest stored event of the type (read when its row is opened, one request), so it is what a
 * receiver gets from this environment, not a made-up sample.
 */
export function EventCatalogPage() {
  const { identity } = useAccount();
  const types = useApi<EventType[]>("/events/types", { per_page: 100 });
  return (
    <section aria-labelledby="catalog-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("events")}>Events</a> / <span>Catalog</span>
      </nav>
      <header class="page-head">
        <h2 id="catalog-title">Event catalog</h2>
      </header>
      <p class="muted">
        The system's event types and the custom types {identity.environment} has emitted (by clients or workflow <code>emit</code> steps).
        Open a type for its newest payload.
      </p>
      <Loaded state={types} what="event types">
        {(rows) =>
          rows.length === 0 ? (
            <Empty>No event types yet.</Empty>
          ) : (
            <ul class="catalog">
              {rows.map((t) => (
                <TypeEntry key={t.type} type={t} />
              ))}
            </ul>
          )
        }
      </Loaded>
    </section>
  );
}

/** A type as a card rather than a table row: its description stays readable on a phone. */
function TypeEntry({ type }: { type: EventType }) {
  const [open, setOpen] = useState(false);
  return (
    <li class="panel" aria-label={type.type} data-type={type.type}>
      <p class="catalog-head">
        <code>{type.type}</code> <span class="chip">{type.system ? "system" : "custom"}</span>
      </p>
      <p class="break">
        {type.system ? (
          type.description
        ) : (
          <span class="muted">
            Emitted in this environment, first <Time at={type.first_seen_at} />.
          </span>
        )}
      </p>
      <details onToggle={(e) => setOpen(e.currentTarget.open)}>
        <summary>Example payload</summary>
        {open && <Example type={type.type} />}
      </details>
    </li>
  );
}

function Example({ type }: { type: string }) {
  const { identity } = useAccount();
  const latest = useApi<PlatformEvent[]>("/events", { type, per_page: 1 });
  return (
    <Loaded state={latest} what="an example">
      {(events) =>
        events.length === 0 ? (
          <p class="muted small">
            No {type} event in {identity.environment} yet.
          </p>
        ) : (
          <>
            <p class="small">
              Newest: <a href={href("events", events[0]!.id)}>{events[0]!.id}</a>
            </p>
            <Json value={events[0]!.data} label={`Example payload of ${type}`} />
          </>
        )
      }
    </Loaded>
  );
}
