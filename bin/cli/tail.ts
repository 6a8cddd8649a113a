import type { ApiCallError, Api } from "./http";
import type { Output } from "./output";
import { pollUntilStopped } from "./poll";
import { safe } from "./printable.logic";

/**
 * `events tail` and `deliveries tail`: the list endpoints read by cursor (`ending_before` the newest
 * id printed), so each poll reads one bounded page of what is new, until Ctrl-C.
 */
const PAGE = 100;
/** Pages read at most per poll of one list: of a webhook's pending deliveries (their retries), or of a log read from its start. */
const MAX_PAGES = 10;
/** Webhooks `deliveries tail` follows without --webhook: the newest this many, looked up again every 10 s. */
export const MAX_WEBHOOKS = 100;
const REFRESH_MS = 10_000;

const withQuery = (path: string, query: string) => `${path}${path.includes("?") ? "&" : "?"}${query}`;

/** The newest id of a list, to start after it (what exists is not printed again). */
async function newestId(api: Api, path: string): Promise<string | undefined> {
  const { data } = await api.call<{ id: string }[]>("GET", withQuery(path, "limit=1"));
  return data[0]?.id;
}

/**
 * Everything newer than the cursor, oldest first, each handed to `each` and then made the cursor,
 * so an error half-way loses and repeats nothing. Without a cursor (a log that was empty, a webhook
 * created since), everything in the log is new. Answers the requests made.
 */
async function newer<T extends { id: string }>(
  api: Api,
  path: string,
  cursor: { id: string | undefined },
  each: (item: T) => void,
): Promise<number> {
  let requests = 0;
  if (cursor.id === undefined) {
    // Newest first: page back to the start (bounded), then print from the oldest.
    const all: T[] = [];
    let after: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      requests++;
      const { data, meta } = await api.call<T[]>("GET", withQuery(path, `limit=${PAGE}${after ? `&starting_after=${after}` : ""}`));
      all.push(...data);
      if (!meta?.has_more || data.length === 0) break;
      after = data[data.length - 1].id;
    }
    for (const item of all.sort((a, b) => (a.id < b.id ? -1 : 1))) {
      each(item);
      cursor.id = item.id;
    }
    return requests;
  }
  for (;;) {
    requests++;
    const { data, meta }: { data: T[]; meta?: any } = await api.call<T[]>(
      "GET",
      withQuery(path, `limit=${PAGE}&ending_before=${cursor.id}`),
    );
    for (const item of [...data].sort((a, b) => (a.id < b.id ? -1 : 1))) {
      each(item);
      cursor.id = item.id;
    }
    if (!meta?.has_more || data.length === 0) return requests;
  }
}

export async function tailEvents(api: Api, out: Output, type: string | undefined): Promise<void> {
  const path = `/events${type ? `?type=${encodeURIComponent(type)}` : ""}`;
  const cursor = { id: await newestId(api, path) };
  out.info(`following new events${type ? safe` of type ${type}` : ""} (Ctrl-C to stop)`);
  await pollUntilStopped({
    out,
    poll: () =>
      newer<any>(api, path, cursor, (e) => out.line(e, safe`${e.created_at}  ${e.id}  ${e.type}  ${e.source}  ${JSON.stringify(e.data)}`)),
  });
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: string;
  attempts: { number: number; at: string; status_code: number | null; duration_ms: number; error: string | null }[];
}

interface Log {
  path: string;
  cursor: { id: string | undefined };
}

/**
 * New attempts: of new deliveries, and retries of pending ones (those from before it started
 * included), read from each log's list of pending deliveries rather than one by one. A delivery
 * that leaves that list is read once more, for its last attempt.
 */
export async function tailDeliveries(api: Api, out: Output, webhooks: string[], listener: string | undefined): Promise<void> {
  const startedAt = new Date().toISOString();
  const logs = new Map<string, Log>();
  const follow = async (path: string, fromNow: boolean) => {
    if (!logs.has(path)) logs.set(path, { path, cursor: { id: fromNow ? await newestId(api, path) : undefined } });
  };
  const everyWebhook = webhooks.length === 0 && !listener;
  const refresh = async (fromNow: boolean) => {
    const { data } = await api.call<{ id: string }[]>("GET", `/webhooks?limit=${MAX_WEBHOOKS}`);
    for (const w of data) await follow(`/webhooks/${encodeURIComponent(w.id)}/deliveries`, fromNow);
  };
  for (const id of webhooks) await follow(`/webhooks/${encodeURIComponent(id)}/deliveries`, true);
  if (listener) await follow(`/listen/${encodeURIComponent(listener)}/deliveries`, true);
  if (everyWebhook) await refresh(true);
  let refreshed = Date.now();

  /** delivery id → attempts printed, while it is pending. */
  const printed = new Map<string, { log: Log; count: number }>();
  const show = (log: Log, d: DeliveryRow) => {
    const done = printed.get(d.id)?.count ?? 0;
    let count = done;
    for (const a of d.attempts.slice(done)) {
      count++;
      // Attempts before the tail started are not news (a pending delivery's earlier tries).
      if (a.at < startedAt) continue;
      out.line(
        { ...a, delivery_id: d.id, webhook_id: d.webhook_id, event_id: d.event_id, event_type: d.event_type, delivery_status: d.status },
        safe`${a.at}  ${d.id}  ${d.event_type}  attempt ${a.number} → ${a.status_code ?? "no answer"} (${a.duration_ms} ms)${a.error ? ` ${a.error}` : ""}`,
      );
      printed.set(d.id, { log, count });
    }
    if (d.status === "pending") printed.set(d.id, { log, count });
    else printed.delete(d.id);
  };

  const pollLog = async (log: Log): Promise<number> => {
    let requests = await newer<DeliveryRow>(api, log.path, log.cursor, (d) => show(log, d));
    const stillPending = new Set<string>();
    let after: string | undefined;
    let complete = false;
    let oldestRead = "";
    for (let page = 0; page < MAX_PAGES && !complete; page++) {
      requests++;
      const query = `status=pending&limit=${PAGE}${after ? `&starting_after=${after}` : ""}`;
      const { data, meta } = await api.call<DeliveryRow[]>("GET", withQuery(log.path, query));
      for (const d of data) {
        stillPending.add(d.id);
        show(log, d);
      }
      complete = !meta?.has_more || data.length === 0;
      after = data[data.length - 1]?.id;
      oldestRead = after ?? oldestRead;
    }
    for (const [id, p] of [...printed]) {
      if (p.log !== log || stillPending.has(id) || (!complete && id < oldestRead)) continue;
      requests++;
      try {
        const { data } = await api.call<DeliveryRow>("GET", `${log.path}/${encodeURIComponent(id)}`);
        show(log, data);
      } catch (err) {
        if ((err as ApiCallError).status !== 404) throw err;
        printed.delete(id);
      }
    }
    return requests;
  };

  out.info(
    `following ${logs.size} delivery log${logs.size === 1 ? "" : "s"}${everyWebhook ? ", and those of webhooks created from now on" : ""} (Ctrl-C to stop)`,
  );
  await pollUntilStopped({
    out,
    async poll() {
      let requests = 0;
      if (everyWebhook && Date.now() - refreshed > REFRESH_MS) {
        // Webhooks created since: all their deliveries are new.
        await refresh(false);
        refreshed = Date.now();
        requests++;
      }
      for (const log of logs.values()) requests += await pollLog(log);
      return requests;
    },
    absorb(err: ApiCallError) {
      // A webhook deleted while followed: its log is gone, the others go on.
      const gone = err.status === 404 ? [...logs.keys()].find((path) => err.message.includes(path.split("/")[2] ?? "\0")) : undefined;
      if (gone === undefined) return false;
      logs.delete(gone);
      out.info(`stopped following ${gone}: ${err.message}`);
      return true;
    },
  });
}
