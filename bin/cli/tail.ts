import type { Api } from "./http";
import type { Output } from "./output";

/**
 * `events tail` and `deliveries tail`: the list endpoints polled by cursor (`ending_before` the
 * newest id seen), so each poll reads one bounded page of what is new, until Ctrl-C.
 */
const POLL_MS = 500;
const PAGE = 100;
/** Webhooks followed by `deliveries tail` without --webhook. */
const MAX_WEBHOOKS = 20;

const stopped = (() => {
  let stop = false;
  process.once("SIGINT", () => (stop = true));
  process.once("SIGTERM", () => (stop = true));
  return () => stop;
})();
const pause = () => new Promise((r) => setTimeout(r, POLL_MS));

/** The newest id of a list, to start after it (what exists is not printed again). */
async function newestId(api: Api, path: string): Promise<string | undefined> {
  const sep = path.includes("?") ? "&" : "?";
  const { data } = await api.call<{ id: string }[]>("GET", `${path}${sep}limit=1`);
  return data[0]?.id;
}

/** Everything newer than `cursor`, oldest first; answers the new cursor. */
async function newer<T extends { id: string }>(
  api: Api,
  path: string,
  cursor: string | undefined,
  each: (item: T) => void,
): Promise<string | undefined> {
  const sep = path.includes("?") ? "&" : "?";
  for (;;) {
    const { data, meta } = await api.call<T[]>("GET", `${path}${sep}limit=${PAGE}${cursor ? `&ending_before=${cursor}` : ""}`);
    const items = [...data].sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const item of items) each(item);
    if (items.length > 0) cursor = items[items.length - 1].id;
    // Without a cursor the first page is the newest; with one, has_more says more new ones wait.
    if (!meta?.has_more || !cursor) return cursor;
  }
}

export async function tailEvents(api: Api, out: Output, type: string | undefined): Promise<void> {
  const path = `/events${type ? `?type=${encodeURIComponent(type)}` : ""}`;
  let cursor = await newestId(api, path);
  out.warn(`following new events${type ? ` of type ${type}` : ""} (Ctrl-C to stop)`);
  while (!stopped()) {
    cursor = await newer<any>(api, path, cursor, (e) =>
      out.line(e, `${e.created_at}  ${e.id}  ${e.type}  ${e.source}  ${JSON.stringify(e.data)}`),
    );
    await pause();
  }
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: string;
  attempts: { number: number; at: string; status_code: number | null; duration_ms: number; error: string | null }[];
}

/**
 * New attempts: of new deliveries, and of the pending ones already seen (retries), which are
 * looked up again by id while they stay pending.
 */
export async function tailDeliveries(api: Api, out: Output, webhooks: string[], listener: string | undefined): Promise<void> {
  let logs = webhooks.map((id) => `/webhooks/${encodeURIComponent(id)}/deliveries`);
  if (listener) logs.push(`/listen/${encodeURIComponent(listener)}/deliveries`);
  if (logs.length === 0) {
    const { data } = await api.call<{ id: string }[]>("GET", `/webhooks?limit=${MAX_WEBHOOKS}`);
    logs = data.map((w) => `/webhooks/${w.id}/deliveries`);
    if (logs.length === 0) throw new Error("no webhooks in this environment: pass --webhook or --listener");
  }
  const cursors = new Map<string, string | undefined>();
  for (const log of logs) cursors.set(log, await newestId(api, log));
  /** delivery path → attempts printed, while pending. */
  const pending = new Map<string, number>();
  const show = (log: string, d: DeliveryRow, from: number) => {
    for (const a of d.attempts.slice(from))
      out.line(
        { ...a, delivery_id: d.id, webhook_id: d.webhook_id, event_id: d.event_id, event_type: d.event_type, delivery_status: d.status },
        `${a.at}  ${d.id}  ${d.event_type}  attempt ${a.number} → ${a.status_code ?? "no answer"} (${a.duration_ms} ms)${a.error ? ` ${a.error}` : ""}`,
      );
    if (d.status === "pending") pending.set(`${log}/${d.id}`, d.attempts.length);
    else pending.delete(`${log}/${d.id}`);
  };
  out.warn(`following ${logs.length} delivery log(s) (Ctrl-C to stop)`);
  while (!stopped()) {
    for (const log of logs) cursors.set(log, await newer<DeliveryRow>(api, log, cursors.get(log), (d) => show(log, d, 0)));
    for (const [path, seen] of [...pending]) {
      const { data } = await api.call<DeliveryRow>("GET", path);
      show(path.slice(0, path.lastIndexOf("/")), data, seen);
    }
    await pause();
  }
}
