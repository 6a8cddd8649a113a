import { invalidParam } from "../../shared/errors";
import { addHistograms, emptyHistogram, quantileOf } from "../../shared/usage";
import type { StoredRow } from "./tiers";

/** The longest window one question may cover, and what each granularity covers when `from` is left out. */
export const MAX_WINDOW_MS = 90 * 24 * 60 * 60 * 1000;
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const DEFAULT_SPAN = { hour: DAY, day: 30 * DAY } as const;

/** `from` ≤ t < `to`, both ISO 8601 with a time zone (or a bare date, UTC); defaults end now. */
export function windowOf(from: string | undefined, to: string | undefined, granularity: "hour" | "day", nowMs = Date.now()): { from: number; to: number } {
  const parse = (value: string, param: "from" | "to"): number => {
    const ms = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value) ? Date.parse(value) : NaN;
    if (Number.isNaN(ms)) throw invalidParam(param, `${param} must be an ISO 8601 date or time with a zone, such as 2026-11-23 or 2026-11-23T10:00:00Z`);
    return ms;
  };
  const end = to === undefined ? nowMs : parse(to, "to");
  const start = from === undefined ? end - DEFAULT_SPAN[granularity] : parse(from, "from");
  if (start >= end) throw invalidParam("from", "from must be before to");
  if (end - start > MAX_WINDOW_MS) throw invalidParam("from", "the window from..to may span at most 90 days");
  return { from: start, to: end };
}

export const bucketStart = (ms: number, granularity: "hour" | "day"): number => ms - (ms % (granularity === "hour" ? HOUR : DAY));

export interface UsageBucket {
  start: string;
  route?: string;
  status?: number;
  key_id?: string;
  count: number;
  errors: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

/**
 * Rows summed into buckets of the granularity (and per group): counts, errors, and p50/p95 from the
 * merged latency histograms, so each quantile is the upper bound of the bucket the true one is in.
 * Without `group_by`, every bucket of the window is listed, empty ones with zeros.
 */
export function usageBuckets(rows: readonly Omit<StoredRow, "id">[], window: { from: number; to: number }, granularity: "hour" | "day", groupBy?: "route" | "status" | "key"): UsageBucket[] {
  const groups = new Map<string, { start: number; group?: string | number; count: number; errors: number; hist: number[] }>();
  const groupOf = (r: Omit<StoredRow, "id">) => (groupBy === "route" ? `${r.method} ${r.route}` : groupBy === "status" ? r.status : groupBy === "key" ? r.key_id : undefined);
  if (!groupBy) {
    for (let t = bucketStart(window.from, granularity); t < window.to; t += granularity === "hour" ? HOUR : DAY) {
      groups.set(String(t), { start: t, count: 0, errors: 0, hist: emptyHistogram() });
    }
  }
  for (const r of rows) {
    const start = bucketStart(r.start, granularity);
    const group = groupOf(r);
    const key = `${start}|${group ?? ""}`;
    let g = groups.get(groupBy ? key : String(start));
    if (!g) {
      g = { start, group, count: 0, errors: 0, hist: emptyHistogram() };
      groups.set(groupBy ? key : String(start), g);
    }
    g.count += r.count;
    g.errors += r.errors;
    addHistograms(g.hist, r.hist);
  }
  const field = groupBy === "key" ? "key_id" : groupBy;
  return [...groups.values()]
    .sort((a, b) => a.start - b.start || String(a.group).localeCompare(String(b.group)))
    .map((g) => ({
      start: new Date(g.start).toISOString(),
      ...(field && { [field]: g.group }),
      count: g.count,
      errors: g.errors,
      p50_ms: quantileOf(g.hist, 0.5),
      p95_ms: quantileOf(g.hist, 0.95),
    }));
}

/** Counts by status, their total, and the share that succeeded among those that ended. */
export function outcomes<S extends string>(statuses: readonly S[], items: readonly S[]) {
  const by_status = Object.fromEntries(statuses.map((s) => [s, 0])) as Record<S, number>;
  for (const s of items) by_status[s] = (by_status[s] ?? 0) + 1;
  const succeeded = (by_status as Record<string, number>).succeeded ?? 0;
  const ended = items.filter((s) => s !== "pending").length;
  return { total: items.length, by_status, success_rate: ended === 0 ? null : Math.round((succeeded / ended) * 10_000) / 10_000 };
}
