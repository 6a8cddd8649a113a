import { useEffect, useState } from "preact/hooks";
import type { Delivery } from "../../api";
import { Empty, Loaded, Pager, useApi } from "../../ui";
import { DeliveryItem } from "./deliveries";
import { DeliveryFilters, isFiltered, NO_FILTER, queryOf, type DeliveryFilter } from "./filters";

/**
 * A webhook's delivery log: filtered (status, event type, event or delivery id, a creation window),
 * paged, and refreshed every 2 s while live updates are on. `version` changes when the page started
 * something that adds deliveries (a test, a recovery): the log is read again at once.
 */
export function DeliveryLog({ webhookId, version }: { webhookId: string; version: number }) {
  const base = `/webhooks/${encodeURIComponent(webhookId)}/deliveries`;
  const [filter, setFilter] = useState<DeliveryFilter>(NO_FILTER);
  const [page, setPage] = useState(1);
  const [live, setLive] = useState(true);
  const one = filter.deliveryId.trim();
  const list = useApi<Delivery[]>(one ? null : base, { page, per_page: 20, ...queryOf(filter) }, live ? 2000 : undefined);
  const single = useApi<Delivery>(one ? `${base}/${encodeURIComponent(one)}` : null, undefined, live ? 2000 : undefined);
  const shown = one ? { ...single, data: single.data && [single.data] } : list;
  const reload = shown.reload;
  useEffect(() => {
    if (version > 0) reload();
  }, [version]);

  return (
    <section aria-labelledby="deliveries-title">
      <header class="page-head">
        <h3 id="deliveries-title">Delivery log</h3>
        <div class="filters">
          <label class="inline">
            <input type="checkbox" role="switch" checked={live} onChange={(e) => setLive(e.currentTarget.checked)} />
            Live updates
          </label>
          <button type="button" class="outline secondary small" onClick={reload}>
            Refresh
          </button>
        </div>
      </header>
      <DeliveryFilters value={filter} onChange={(next) => (setFilter(next), setPage(1))} />
      <Loaded state={shown} what="deliveries">
        {(items) =>
          items.length === 0 ? (
            <Empty>
              {!isFiltered(filter)
                ? "No deliveries yet: events this endpoint subscribes to will appear here."
                : isFiltered({ ...filter, status: "all" })
                  ? "No deliveries match these filters."
                  : `No ${filter.status} deliveries.`}
            </Empty>
          ) : (
            <ul class="deliveries" aria-label="Deliveries">
              {items.map((d) => (
                <DeliveryItem key={d.id} webhookId={webhookId} delivery={d} onChanged={reload} />
              ))}
            </ul>
          )
        }
      </Loaded>
      {!one && <Pager meta={list.meta} onPage={setPage} />}
    </section>
  );
}
