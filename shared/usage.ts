import { randomBytes } from "node:crypto";
import type { Environment } from "./storage/types";

/**
 * Usage metering (contract section 9). The gateway counts every authenticated request into rows,
 * one per (minute, organization, environment, key, method, route template, status), each with a
 * latency histogram, and hands them to the analytics service in batches. A batch keeps its id until
 * an analytics node has acknowledged it; the analytics service stores row `i` of batch `b` under the
 * id `b.i`, so a batch sent again (its acknowledgement lost) stores nothing twice.
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

/** One answered request, as the gateway meters it. */
export type Request = Pick<UsageRow, "org_id" | "environment" | "key_id" | "method" | "route" | "status"> & {
  at: number;
  latency_ms: number;
};

/** One gateway node's meter: rows accumulate, then leave as batches that wait for an acknowledgement. */
export class Meter {
  private rows = new Map<string, UsageRow>();
  private readonly waiting: UsageBatch[] = [];
  private readonly node = randomBytes(6).toString("hex");
  private seq = 0;

  constructor(private readonly maxWaiting: number) {}

  record(r: Request): void {
    const minute = r.at - (r.at % 60_000);
    const key = `${minute}|${r.org_id}|${r.environment}|${r.key_id}|${r.method}|${r.route}|${r.status}`;
    let row = this.rows.get(key);
    if (!row) {
      row = {
        minute,
        org_id: r.org_id,
        environment: r.environment,
        key_id: r.key_id,
        method: r.method,
        route: r.route,
        status: r.status,
        count: 0,
        errors: 0,
        latency_ms_sum: 0,
        hist: emptyHistogram(),
      };
      this.rows.set(key, row);
    }
    row.count += 1;
    if (r.status >= 400) row.errors += 1;
    row.latency_ms_sum += r.latency_ms;
    row.hist[bucketOf(r.latency_ms)] += 1;
  }

  /** The batches to send, oldest first, after closing the rows gathered so far into a new one. */
  batches(): UsageBatch[] {
    if (this.rows.size > 0) {
      this.waiting.push({ batch_id: `ub_${this.node}_${(this.seq += 1)}`, rows: [...this.rows.values()] });
      this.rows = new Map();
    }
    // An analytics service away for long: the oldest counts go first, memory stays bounded.
    if (this.waiting.length > this.maxWaiting) this.waiting.splice(0, this.waiting.length - this.maxWaiting);
    return [...this.waiting];
  }

  acknowledged(batchId: string): void {
    const i = this.waiting.findIndex((b) => b.batch_id === batchId);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  get backlog(): number {
    return this.waiting.length;
  }
}
