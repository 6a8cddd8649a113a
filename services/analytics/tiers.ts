import { randomUUID } from "node:crypto";
import { isDuplicate } from "../../shared/errors";
import { ALL_TENANTS, type Collection, type Doc, type Scope } from "../../shared/storage/types";
import { addHistograms, type UsageRow } from "../../shared/records/usage";

/**
 * Usage is kept in three tiers: minute rows (as the gateways send them), hour rows and day rows.
 * Once a period has closed (and the gateways' longest hold on a batch has passed), one analytics
 * node folds the rows of the tier below into rows of the period, each stored under an id made of
 * the period and its dimensions, so a fold that runs again after a crash stores nothing twice; a
 * cursor per tier, moved by compare-and-set under a lease, says how far folding has come. Rows of
 * a tier are pruned only once folded, and a question reads each stretch of its window from the
 * finest tier that still holds it.
 */
export type StoredRow = Omit<UsageRow, "minute"> & Doc & { start: number };

export interface TierState extends Doc {
  /** Periods before this one are folded into this tier. */
  folded_until: number;
  /** Rows of the tier below are kept from here on (older ones were pruned). */
  below_kept_from: number;
  lease_until: number;
  lease?: string;
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** A gateway holds a batch at most 10 minutes; a period is folded only after that much more. */
export const FOLD_GRACE_MS = 15 * MINUTE;
const LEASE_MS = 5 * MINUTE;
const PLATFORM: Scope = ALL_TENANTS;

export interface Tier {
  name: "minute" | "hour" | "day";
  size: number;
  rows: Collection<StoredRow>;
  /** How long its rows are kept (once folded into the tier above). */
  keepMs: number;
}

export const tierSizes = { minute: MINUTE, hour: HOUR, day: DAY } as const;
const floorTo = (ms: number, size: number) => ms - (ms % size);
const ceilTo = (ms: number, size: number) => floorTo(ms + size - 1, size);

/** The rows of `lower` in [start, start + size), summed per dimension into rows of `upper`'s period. */
export function fold(rows: readonly StoredRow[], tier: "hour" | "day", start: number): StoredRow[] {
  const out = new Map<string, StoredRow>();
  for (const r of rows) {
    const id = `${tier}.${start}.${r.org_id}.${r.environment}.${r.key_id}.${r.method}.${r.route}.${r.status}`;
    const row = out.get(id);
    if (!row) {
      out.set(id, {
        id,
        start,
        org_id: r.org_id,
        environment: r.environment,
        key_id: r.key_id,
        method: r.method,
        route: r.route,
        status: r.status,
        count: r.count,
        errors: r.errors,
        latency_ms_sum: r.latency_ms_sum,
        hist: [...r.hist],
      });
    } else {
      row.count += r.count;
      row.errors += r.errors;
      row.latency_ms_sum += r.latency_ms_sum;
      addHistograms(row.hist, r.hist);
    }
  }
  return [...out.values()];
}

export class Tiers {
  constructor(
    private readonly tiers: readonly [Tier, Tier, Tier],
    private readonly state: Collection<TierState>,
  ) {}

  /** Folds every closed period into the tier above, then prunes what is folded and old. */
  async maintain(now = Date.now()): Promise<{ folded: number; pruned: number }> {
    let folded = 0;
    let pruned = 0;
    for (let i = 1; i < this.tiers.length; i += 1) folded += await this.foldInto(this.tiers[i - 1], this.tiers[i], now);
    for (let i = 0; i < this.tiers.length; i += 1) pruned += await this.prune(this.tiers[i], this.tiers[i + 1], now);
    return { folded, pruned };
  }

  private async stateOf(upper: Tier, lower: Tier, now: number): Promise<TierState> {
    const found = await this.state.get(PLATFORM, upper.name);
    if (found) return found;
    const [oldest] = await lower.rows.find(PLATFORM, {}, { sort: { start: 1 }, limit: 1 });
    const doc: TierState = {
      id: upper.name,
      org_id: "platform",
      folded_until: floorTo(oldest?.start ?? now, upper.size),
      below_kept_from: 0,
      lease_until: 0,
    };
    try {
      await this.state.insert(doc);
      return doc;
    } catch {
      return (await this.state.get(PLATFORM, upper.name)) as TierState;
    }
  }

  private async foldInto(lower: Tier, upper: Tier, now: number): Promise<number> {
    let state = await this.stateOf(upper, lower, now);
    let folded = 0;
    while (state.folded_until + upper.size + FOLD_GRACE_MS <= now) {
      const start = state.folded_until;
      const lease = randomUUID();
      const claimed = await this.state.update(
        PLATFORM,
        { id: upper.name, folded_until: start, lease_until: { $lt: now } },
        { $set: { lease, lease_until: now + LEASE_MS } },
      );
      if (!claimed) return folded; // another node folds this period
      const rows = await lower.rows.find(PLATFORM, { start: { $gte: start, $lt: start + upper.size } });
      for (const row of fold(rows, upper.name as "hour" | "day", start)) {
        try {
          await upper.rows.insert(row);
        } catch (err) {
          if (!isDuplicate(err)) throw err;
        }
      }
      const moved = await this.state.update(
        PLATFORM,
        { id: upper.name, lease },
        { $set: { folded_until: start + upper.size, lease_until: 0 }, $unset: { lease: true } },
      );
      if (!moved) return folded;
      state = moved;
      folded += 1;
    }
    return folded;
  }

  /** Rows older than the tier's keep, and already folded into the tier above (if any). */
  private async prune(tier: Tier, above: Tier | undefined, now: number): Promise<number> {
    let cutoff = floorTo(now - tier.keepMs, above?.size ?? tier.size);
    if (above) {
      const state = await this.state.get(PLATFORM, above.name);
      if (!state) return 0;
      cutoff = Math.min(cutoff, state.folded_until);
      if (cutoff <= state.below_kept_from) return 0;
      // Say first where the finer rows stop, then drop them: a question never finds a gap.
      await this.state.update(PLATFORM, { id: above.name }, { $set: { below_kept_from: cutoff } });
    }
    return tier.rows.deleteMany(PLATFORM, { start: { $lt: cutoff } });
  }

  /**
   * A tenant's rows covering [from, to), each stretch from the coarsest tier that answers it exactly
   * at `granularity`: day rows for whole days already folded (granularity `day`), hour rows for
   * whole hours already folded, minute rows for the rest; and where finer rows are pruned, the
   * coarser ones even for part of a period (as before). So a question reads at most a day's or an
   * hour's rows per period of its window, not every minute row the gateways sent. Each row's
   * `start` is its period's start.
   */
  async rowsFor(scope: Scope, from: number, to: number, granularity: "hour" | "day" = "hour"): Promise<StoredRow[]> {
    const [minute, hour, day] = this.tiers;
    const [hourState, dayState] = await Promise.all([this.state.get(PLATFORM, "hour"), this.state.get(PLATFORM, "day")]);
    const minutesFrom = hourState?.below_kept_from ?? 0;
    const hoursFrom = dayState?.below_kept_from ?? 0;
    const hoursUntil = hourState?.folded_until ?? 0;
    const daysUntil = dayState?.folded_until ?? 0;
    const parts: Promise<StoredRow[]>[] = [];
    const read = (tier: Tier, a: number, b: number) => {
      if (a < b) parts.push(tier.rows.find(scope, { start: { $gte: a, $lt: b } }));
    };
    const finer = (s: number, e: number) => {
      if (s < hoursFrom) read(day, floorTo(s, DAY), Math.min(e, hoursFrom));
      s = Math.max(s, hoursFrom);
      if (s >= e) return;
      // Minute rows are pruned only once folded (minutesFrom ≤ hoursUntil).
      const hoursStart = s < minutesFrom ? floorTo(s, HOUR) : ceilTo(s, HOUR);
      const hoursEnd = e <= minutesFrom ? e : Math.max(Math.min(floorTo(e, HOUR), hoursUntil), minutesFrom);
      if (hoursStart >= hoursEnd) return read(minute, floorTo(s, MINUTE), e);
      read(minute, floorTo(s, MINUTE), hoursStart);
      read(hour, hoursStart, hoursEnd);
      read(minute, hoursEnd, e);
    };
    const daysStart = ceilTo(from, DAY);
    const daysEnd = Math.min(floorTo(to, DAY), daysUntil);
    if (granularity === "day" && daysStart < daysEnd) {
      finer(from, daysStart);
      read(day, daysStart, daysEnd);
      finer(daysEnd, to);
    } else {
      finer(from, to);
    }
    return (await Promise.all(parts)).flat();
  }
}
