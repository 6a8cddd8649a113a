import { call, type Delivery } from "../../api";
import { href } from "../../session";
import { Empty, ErrorNotice, Loaded, NeedsScope, Status, Time, useAccount, useAction, useApi } from "../../ui";

/**
 * An event's deliveries (GET /events/{id}/deliveries), one card per webhook it went to (a card, not
 * a table row, keeps the status and the button on a phone's screen), each with a
 * Redeliver (a new delivery of the same event) or, while it is still pending, Retry now.
 */
export function EventDeliveries({ eventId }: { eventId: string }) {
  const { can } = useAccount();
  const list = useApi<Delivery[]>(`/events/${encodeURIComponent(eventId)}/deliveries`, { per_page: 100 }, 3000);
  if (!can("webhooks:read")) return <NeedsScope scope="webhooks:read" />;
  return (
    <Loaded state={list} what="deliveries">
      {(rows) =>
        rows.length === 0 ? (
          <Empty>No webhook subscribed to this event when it was stored.</Empty>
        ) : (
          <ul class="cards" aria-label="Deliveries of this event">
            {rows.map((d) => (
              <li key={d.id} class="panel" aria-label={`Delivery to ${d.webhook_id}`}>
                <p class="cards-head">
                  <Status value={d.status} /> <a href={href("webhooks", d.webhook_id)}>{d.webhook_id}</a>
                </p>
                <p class="small">
                  <span data-attempts>{attemptsText(d)}</span> · <Time at={d.created_at} />
                </p>
                <p class="small muted break">{d.id}</p>
                <Resend delivery={d} onDone={list.reload} />
              </li>
            ))}
          </ul>
        )
      }
    </Loaded>
  );
}

const attemptsText = (d: Delivery) => {
  const last = d.attempts[d.attempts.length - 1];
  return `${d.attempts.length} attempt${d.attempts.length === 1 ? "" : "s"}${last?.status_code ? ` · HTTP ${last.status_code}` : ""}`;
};

function Resend({ delivery: d, onDone }: { delivery: Delivery; onDone(): void }) {
  const { key, can } = useAccount();
  const verb = d.status === "pending" ? "retry" : "redeliver";
  const path = `/webhooks/${encodeURIComponent(d.webhook_id)}/deliveries/${encodeURIComponent(d.id)}/${verb}`;
  const resend = useAction(() => call<Delivery>(key, "POST", path));
  if (!can("webhooks:write")) return null;
  return (
    <>
      <button
        type="button"
        class="outline small"
        aria-label={`${verb === "retry" ? "Retry now" : "Redeliver"} ${d.id}`}
        aria-busy={resend.pending}
        disabled={resend.pending}
        onClick={async () => (await resend.go()) && onDone()}
      >
        {verb === "retry" ? "Retry now" : "Redeliver"}
      </button>
      <ErrorNotice error={resend.error} />
    </>
  );
}
