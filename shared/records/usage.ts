import type { Environment } from "../storage/types";

/**
 * Usage metering (contract section 9). The gateway counts every authenticated request into rows,
 * one per (minute, organization, environment, key, method, route template, status), each with a
 * latency histogram, and hands them to the analytics service in batches (services/gateway/meter.ts).
 * A batch keeps its id until an analytics node has acknowledged it; the analytics service stores
 * row `i` of batch `b` under the id `b.i`, so a batch sent again (its acknowledgement lost) stores
 * nothing twice. The rows' shape and the histogram are shared by the two.
 */

/** Upper bounds (ms) of the latency histogram's buckets; the last bucket holds everything slower. */
export const LATENCY_BOUNDS_MS = [
  1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10_000, 30_000,
] as const;

export function bucketOf(ms: number): number {
  for (let i = 0; i < LATENCY_BOUNDS_MS.length; i += 1) if (ms <= LATENCY_BOUNDS_MS[i]) return i;
  return LATENCY_BOUNDS_MS.length;
}

/**
 * The `q` quantile of a histogram, as the upper bound of the bucket it falls in (so within one
 * bucket of the true value); the overflow bucket reports the largest bound. Null when empty.
 */
export function quantileOf(hist: readonly number[], q: number): number | null {
  const total = hist.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < hist.length; i += 1) {
    seen += hist[i];
    if (seen >= rank) return LATENCY_BOUNDS_MS[Math.min(i, LATENCY_BOUNDS_MS.length - 1)];
  }
  return LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1];
}

export const emptyHistogram = (): number[] => new Array<number>(LATENCY_BOUNDS_MS.length + 1).fill(0);

export function addHistograms(into: number[], from: readonly number[]): void {
  for (let i = 0; i < into.length; i += 1) into[i] += from[i] ?? 0;
}

export interface UsageRow {
  /** Start of the minute, ms since the epoch. */
  minute: number;
  org_id: string;
  environment: Environment;
  key_id: string;
  method: string;
  /** The route template, e.g. `/workflows/{id}`. */
  route: string;
  status: number;
  count: number;
  /** Answers with a status of 400 or more. */
  errors: number;
  latency_ms_sum: number;
  hist: number[];
}

export interface UsageBatch {
  batch_id: string;
  rows: UsageRow[];
}
