import { DELIVERY_STATUSES } from "../../../../shared/api/wire";
import { Choice, statusOptions } from "../../ui";

export const DELIVERY_FILTERS = statusOptions(DELIVERY_STATUSES);

/** What the delivery log is narrowed to; empty strings mean "any". */
export interface DeliveryFilter {
  status: keyof typeof DELIVERY_FILTERS;
  eventType: string;
  eventId: string;
  /** A delivery's id: the log shows that one delivery. */
  deliveryId: string;
  /** `datetime-local` values, in the browser's time zone. */
  from: string;
  to: string;
}

export const NO_FILTER: DeliveryFilter = { status: "all", eventType: "", eventId: "", deliveryId: "", from: "", to: "" };

/** The list's query for a filter (the API's names; times as ISO instants). */
export function queryOf(f: DeliveryFilter): Record<string, string | undefined> {
  const iso = (local: string) => (local ? new Date(local).toISOString() : undefined);
  return {
    status: f.status === "all" ? undefined : f.status,
    event_type: f.eventType.trim() || undefined,
    event_id: f.eventId.trim() || undefined,
    created_after: iso(f.from),
    created_before: iso(f.to),
  };
}

export const isFiltered = (f: DeliveryFilter) => JSON.stringify(f) !== JSON.stringify(NO_FILTER);

/** The delivery log's filters: status, event type, event or delivery id, and a creation window. */
export function DeliveryFilters({ value, onChange }: { value: DeliveryFilter; onChange(next: DeliveryFilter): void }) {
  const set = (patch: Partial<DeliveryFilter>) => onChange({ ...value, ...patch });
  const text = (label: string, name: string, field: "eventType" | "eventId" | "deliveryId", placeholder: string) => (
    <label>
      {label}
      <input
        type="search"
        name={name}
        placeholder={placeholder}
        spellcheck={false}
        value={value[field]}
        onChange={(e) => set({ [field]: e.currentTarget.value })}
      />
    </label>
  );
  return (
    <form class="filters delivery-filters" role="search" aria-label="Filter deliveries" onSubmit={(e) => e.preventDefault()}>
      <Choice label="Status" name="status" value={value.status} options={DELIVERY_FILTERS} onChange={(status) => set({ status })} />
      {text("Event type", "event_type", "eventType", "order.created")}
      {text("Event id", "event_id", "eventId", "evt_…")}
      {text("Delivery id", "delivery_id", "deliveryId", "del_…")}
      <label>
        Created from
        <input type="datetime-local" name="from" value={value.from} onChange={(e) => set({ from: e.currentTarget.value })} />
      </label>
      <label>
        Created before
        <input type="datetime-local" name="to" value={value.to} onChange={(e) => set({ to: e.currentTarget.value })} />
      </label>
      {isFiltered(value) && (
        <button type="button" class="outline secondary small" onClick={() => onChange(NO_FILTER)}>
          Clear filters
        </button>
      )}
    </form>
  );
}
