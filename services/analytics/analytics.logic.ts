import { invalidParam } from "../../shared/errors";
import { RUN_COUNTS, WEBHOOK_COUNTS, type OutcomePeriod, type RunCount, type WebhookCount } from "../../shared/records/outcomes";
import { addHistograms, emptyHistogram, quantileOf } from "../../shared/records/usage";
import type { Outcomes, UsageBucket } from "../../shared/api/wire";
import type { StoredRow } from "./tiers";

/** The longest window one question may cover, and what each granularity covers when `from` is left out. */
export const MAX_WINDOW_MS = 90 * 24 * 60 * 60 * 1000;
const HOUR = 60 * 60 * 1000;
const DAY = 24 * HOUR;
const DEFAULT_SPAN = { hour: DAY, day: 30 * DAY } as const;

/** `from` ≤ t < `to`, both ISO 8601 with a time zone (or a bare date, UTC); defaults end now. */
export function windowOf(
  from: string | undefined,
  to: string | undefined,
  granularity: "hour" | "day",
  nowMs = Date.now(),
): { from: number; to: number } {
  const parse = (value: string, param: "from" | "to"): number => {
    const ms = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value) ? Date.parse(value) : NaN;
    if (Number.isNaN(ms))
      throw invalidParam(param, `${param} must be an ISO 8601 date or time with a zone, such as 2026-11-23 or 2026-11-23T10:00:00Z`);
    return ms;
  };
  const end = to === undefined ? nowMs : parse(to, "to");
  const start = from === undefined ? end - DEFAULT_SPAN[granularity] : parse(from, "from");
  if (start >= end) throw invalidParam("from", "from must be before to");
  if (end - start > MAX_WINDOW_MS) throw invalidParam("from", "the window from..to may span at most 90 days");
  return { from: start, to: end };
}

export const bucketStart = (ms: number, granularity: "hour" | "day"): number => ms - (ms % (granularity === "hour" ? HOUR : DAY));

/**
 * Rows summed into buckets of the granularity (and per group): counts, errors, and p50/p95 from the
 * merged latency histograms, so each quantile is the upper bound of the bucket the true one is in.
 * Without `group_by`, every bucket of the window is listed, empty ones with zeros.
 */
export function usageBuckets(
  rows: readonly Omit<StoredRow, "id">[],
  window: { from: number; to: number },
  granularity: "hour" | "day",
  groupBy?: "route" | "status" | "key",
): UsageBucket[] {
  const groups = new Map<string, { start: number; group?: string | number; count: number; errors: number; hist: number[] }>();
  const groupOf = (r: Omit<StoredRow, "id">) =>
    groupBy === "route" ? `${r.method} ${r.route}` : groupBy === "status" ? r.status : groupBy === "key" ? r.key_id : undefined;
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

export interface OutcomePart {
  period: OutcomePeriod;
  from: number;
  to: number;
}

const floorTo = (ms: number, size: number) => ms - (ms % size);
const ceilTo = (ms: number, size: number) => floorTo(ms + size - 1, size);

/**
 * The window outcome counters answer for `[from, to)`: widened to whole hours (and to whole days
 * before `hoursFrom`, where hour rows are pruned), read from day rows for the whole days inside it
 * and from hour rows for the hours at its ends. So a window of 90 days reads at most 23 + 91 + 23
 * rows per webhook or workflow.
 */
export function outcomeWindow(from: number, to: number, hoursFrom: number): { from: number; to: number; parts: OutcomePart[] } {
  let start = floorTo(from, HOUR);
  let end = ceilTo(to, HOUR);
  if (start < hoursFrom) start = floorTo(start, DAY);
  if (end <= hoursFrom) end = ceilTo(end, DAY);
  const daysFrom = ceilTo(start, DAY);
  const daysTo = floorTo(end, DAY);
  const parts: OutcomePart[] =
    daysFrom < daysTo
      ? [
          { period: "hour", from: start, to: daysFrom },
          { period: "day", from: daysFrom, to: daysTo },
          { period: "hour", from: daysTo, to: end },
        ]
      : [{ period: "hour", from: start, to: end }];
  return { from: start, to: end, parts: parts.filter((p) => p.from < p.to) };
}

const rate = (n: number, of: number): number | null => (of === 0 ? null : Math.round((n / of) * 10_000) / 10_000);

function sums<K extends string>(fields: readonly K[], rows: readonly Partial<Record<K, number>>[]): Record<K, number> {
  const out = Object.fromEntries(fields.map((f) => [f, 0])) as Record<K, number>;
  for (const row of rows) for (const f of fields) out[f] += row[f] ?? 0;
  return out;
}

/**
 * Deliveries created in the window by status (pending: created and not settled), their attempts,
 * `success_rate` over attempts (so an endpoint failing its retries counts from its first failed
 * attempt, not only once its deliveries give up) and `delivery_success_rate` over settled deliveries.
 */
export function deliveryOutcomes(rows: readonly Partial<Record<WebhookCount, number>>[]): Outcomes {
  const c = sums(WEBHOOK_COUNTS, rows);
  // Never below zero, even when a crash lost a `created` count but not its settlement (see shared/records/outcomes.ts).
  const pending = Math.max(0, c.created - c.succeeded - c.failed);
  const attempts = c.attempts_succeeded + c.attempts_failed;
  return {
    total: pending + c.succeeded + c.failed,
    by_status: { pending, succeeded: c.succeeded, failed: c.failed },
    success_rate: rate(c.attempts_succeeded, attempts),
    attempt_counts: { total: attempts, succeeded: c.attempts_succeeded, failed: c.attempts_failed },
    delivery_success_rate: rate(c.succeeded, c.succeeded + c.failed),
  };
}

/** Runs that ended in the window by status, and the share that succeeded. */
export function runOutcomes(rows: readonly Partial<Record<RunCount, number>>[]): Outcomes {
  const by_status = sums(RUN_COUNTS, rows);
  const total = by_status.succeeded + by_status.failed + by_status.cancelled;
  return { total, by_status, success_rate: rate(by_status.succeeded, total) };
}

/** Rows grouped by `key` (a webhook's or workflow's id), in id order. */
export function groupBy<R>(rows: readonly R[], key: (row: R) => string): [string, R[]][] {
  const groups = new Map<string, R[]>();
  for (const row of rows) {
    const group = groups.get(key(row));
    if (group) group.push(row);
    else groups.set(key(row), [row]);
  }
  return [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
