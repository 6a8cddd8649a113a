import { randomBytes } from "node:crypto";
import { bucketOf, emptyHistogram, type UsageBatch, type UsageRow } from "../../shared/records/usage";

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
