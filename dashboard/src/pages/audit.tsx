import { useState } from "preact/hooks";
import type { AuditEntry } from "../api";
import { href } from "../session";
import { Empty, Loaded, NeedsScope, Pager, Time, useAccount, useApi } from "../ui";

const FILTERS = { action: "Action", resource_id: "Resource id", key_id: "Key id" } as const;
type Filter = keyof typeof FILTERS;

/** GET /audit-log (org:admin): every successful change in both environments, newest first, by one filter at a time. */
export function AuditLogPage() {
  const { can } = useAccount();
  if (!can("org:admin")) {
    return (
      <section aria-labelledby="audit-title">
        <h2 id="audit-title">Audit log</h2>
        <NeedsScope scope="org:admin" />
      </section>
    );
  }
  return <AuditLog />;
}

function AuditLog() {
  const [page, setPage] = useState(1);
  const [by, setBy] = useState<Filter>("action");
  const [value, setValue] = useState("");
  const [applied, setApplied] = useState<{ by: Filter; value: string } | null>(null);
  const list = useApi<AuditEntry[]>("/audit-log", { page, per_page: 25, ...(applied && { [applied.by]: applied.value }) });
  return (
    <section aria-labelledby="audit-title">
      <header class="page-head">
        <h2 id="audit-title">Audit log</h2>
      </header>
      <p class="muted">Every successful change made through the API, in both environments, newest first.</p>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setPage(1);
          setApplied(value.trim() ? { by, value: value.trim() } : null);
        }}
      >
        <label>
          Filter by
          <select name="by" value={by} onChange={(e) => setBy(e.currentTarget.value as Filter)}>
            {Object.entries(FILTERS).map(([name, label]) => (
              <option key={name} value={name}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Value
          <input name="value" placeholder="webhook.created" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        </label>
        <button type="submit" class="small">
          Filter
        </button>
        {applied && (
          <button type="button" class="outline secondary small" onClick={() => (setValue(""), setApplied(null), setPage(1))}>
            Clear
          </button>
        )}
      </form>
      <Loaded state={list} what="the audit log">
        {(rows) =>
          rows.length === 0 ? (
            <Empty>{applied ? `Nothing with ${FILTERS[applied.by].toLowerCase()} ${applied.value}.` : "No changes recorded yet."}</Empty>
          ) : (
            <ul class="audit" aria-label="Changes">
              {rows.map((a) => (
                <Entry key={a.id} entry={a} />
              ))}
            </ul>
          )
        }
      </Loaded>
      <Pager meta={list.meta} onPage={setPage} />
    </section>
  );
}

/** An entry as a card, not a table row of seven columns: it reads whole on a phone. */
function Entry({ entry: a }: { entry: AuditEntry }) {
  return (
    <li class="panel" aria-label={`${a.action} ${a.id}`}>
      <p class="audit-head">
        <code>{a.action}</code> <span class="chip">{a.environment}</span>
        <span class="right muted small">
          <Time at={a.created_at} />
        </span>
      </p>
      <p class="break">
        <Resource entry={a} />
      </p>
      <p class="small muted break">
        by {a.actor.key_name ?? "a key"} ({a.actor.key_id}) ·{" "}
        <code>
          {a.method} {a.route}
        </code>{" "}
        · {a.request_id} · from {a.client_address}
      </p>
    </li>
  );
}

const LINKED: Record<string, string> = { webhook: "webhooks", workflow: "workflows", event: "events" };

function Resource({ entry }: { entry: AuditEntry }) {
  const { type, id } = entry.resource;
  if (!id) return <span>{type}</span>;
  const section = LINKED[type];
  return (
    <span class="break">
      {type} {section ? <a href={href(section, id)}>{id}</a> : <code>{id}</code>}
    </span>
  );
}
