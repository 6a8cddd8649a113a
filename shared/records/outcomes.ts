import { ALL_TENANTS, collectionSpec, type Collection, type Doc, type Environment, type IndexSpec } from "../storage/types";

/**
 * Run and delivery outcomes, counted as they happen (contract section 9): one counter row per
 * webhook or workflow per hour and per day, so /analytics/webhooks and /analytics/workflows answer
 * any window from a bounded number of rows (at most 23 + 91 + 23 per subject for 90 days) whatever
 * was delivered or run in it.
 *
 * A delivery counts in the hour and day it was created: `created` when the dispatcher creates it,
 * each attempt as `attempts_succeeded` / `attempts_failed` when it ends, and `succeeded` / `failed`
 * when the delivery settles; a redelivery (webhooks service) takes it out of its settled count, so
 * `created - succeeded - failed` is exactly the deliveries still pending. A run counts by its end
 * status in the hour and day its `workflow.completed` event was stored (once per run: the outbox
 * stores that event once).
 *
 * Owners: the webhook dispatcher (webhook rows) and the workflows service (run rows), each an
 * atomic `increment` (several nodes count into one row exactly), and each prunes its old rows (see
 * Tally); analytics only reads them. A counter is written just after the write it counts, not in the same
 * transaction: a node killed between the two loses those counts (see Tally).
 */
export const OUTCOME_PERIODS = { hour: 3_600_000, day: 86_400_000 } as const;
export type OutcomePeriod = keyof typeof OUTCOME_PERIODS;

export interface OutcomeRow extends Doc {
  environment: Environment;
  /** A counter period, or `latest`: a webhook's one row of its last attempt (see LatestAttempt). */
  period: OutcomePeriod | "latest";
  /** The period's start, ms since the epoch (UTC). */
  start: number;
}

export const WEBHOOK_COUNTS = ["created", "succeeded", "failed", "attempts_succeeded", "attempts_failed"] as const;
export type WebhookCount = (typeof WEBHOOK_COUNTS)[number];
/**
 * Attempts counted in the hour they were made (hour rows only), whatever the hour their delivery was
 * created in: a webhook's health over the last 24 h reads its 24 hour rows (see healthOf).
 */
export const ATTEMPT_COUNTS = ["tried_succeeded", "tried_failed"] as const;
export type AttemptCount = (typeof ATTEMPT_COUNTS)[number];

/** A webhook's `latest` row: its last attempt and the attempts that failed in a row up to it. */
export interface LatestAttempt {
  last_at?: string;
  last_status_code?: number | null;
  last_ok?: boolean;
  /** Attempts failed in a row (0 after a success). */
  streak?: number;
}

export interface WebhookOutcomeRow extends OutcomeRow, Partial<Record<WebhookCount | AttemptCount, number>>, LatestAttempt {
  webhook_id: string;
}

export const RUN_COUNTS = ["succeeded", "failed", "cancelled"] as const;
export type RunCount = (typeof RUN_COUNTS)[number];
export interface RunOutcomeRow extends OutcomeRow, Partial<Record<RunCount, number>> {
  workflow_id: string;
}

const OUTCOME_INDEXES: IndexSpec[] = [
  // A window's rows of one tenant, by period.
  { fields: { org_id: 1, environment: 1, period: 1, start: 1 } },
  // Pruning, across tenants.
  { fields: { period: 1, start: 1 } },
];

/** Owned by the webhook dispatcher; deleting a webhook deletes its rows with its delivery log. */
export const WEBHOOK_OUTCOMES = collectionSpec<WebhookOutcomeRow>("webhook_outcomes", [
  ...OUTCOME_INDEXES,
  { fields: { org_id: 1, webhook_id: 1 } },
]);

/** Owned by the workflows service. */
export const RUN_OUTCOMES = collectionSpec<RunOutcomeRow>("workflow_outcomes", OUTCOME_INDEXES);

const periodsAt = (at: number) =>
  (Object.entries(OUTCOME_PERIODS) as [OutcomePeriod, number][]).map(([period, size]) => ({ period, start: at - (at % size) }));

/** The hour and day rows of a delivery's webhook that count it: those of its creation. */
export function webhookRowsOf(delivery: {
  org_id: string;
  environment: Environment;
  webhook_id: string;
  created_at: string;
}): WebhookOutcomeRow[] {
  const { org_id, environment, webhook_id } = delivery;
  return periodsAt(Date.parse(delivery.created_at)).map(({ period, start }) => ({
    id: `${webhook_id}.${period}.${start}`,
    org_id,
    environment,
    webhook_id,
    period,
    start,
  }));
}

/** The hour row an attempt made at `atMs` counts in (its `tried_*`), and the webhook's `latest` row. */
export function attemptRowsOf(delivery: { org_id: string; environment: Environment; webhook_id: string }, atMs: number) {
  const { org_id, environment, webhook_id } = delivery;
  const start = atMs - (atMs % OUTCOME_PERIODS.hour);
  const hour: WebhookOutcomeRow = { id: `${webhook_id}.hour.${start}`, org_id, environment, webhook_id, period: "hour", start };
  const latest: WebhookOutcomeRow = { id: `${webhook_id}.latest`, org_id, environment, webhook_id, period: "latest", start: 0 };
  return { hour, latest };
}

/** A webhook's health as the API shows it (shared/api/wire.ts WebhookHealth), from its `latest` row and its last 24 hour rows. */
export function healthOf(latest: LatestAttempt | null, hours: readonly Partial<Record<AttemptCount, number>>[]) {
  let succeeded = 0;
  let failed = 0;
  for (const row of hours) {
    succeeded += row.tried_succeeded ?? 0;
    failed += row.tried_failed ?? 0;
  }
  const total = succeeded + failed;
  return {
    last_attempt: latest?.last_at
      ? { at: latest.last_at, status_code: latest.last_status_code ?? null, ok: latest.last_ok === true }
      : null,
    consecutive_failed_attempts: latest?.streak ?? 0,
    attempts_24h: { total, succeeded, failed },
    success_rate_24h: total === 0 ? null : Math.round((succeeded / total) * 10_000) / 10_000,
  };
}

/** The start of the oldest of the 24 hour rows that answer "the last 24 h" at `now` (this hour and the 23 before). */
export const last24hFrom = (now: number): number => now - (now % OUTCOME_PERIODS.hour) - 23 * OUTCOME_PERIODS.hour;

/** The hour and day rows of a workflow that count a run whose end was recorded at `at` (ISO). */
export function runRowsOf(run: { org_id: string; environment: Environment; workflow_id: string }, at: string): RunOutcomeRow[] {
  const { org_id, environment, workflow_id } = run;
  return periodsAt(Date.parse(at)).map(({ period, start }) => ({
    id: `${workflow_id}.${period}.${start}`,
    org_id,
    environment,
    workflow_id,
    period,
    start,
  }));
}

/**
 * Hour rows are kept `hourKeepMs` (USAGE_RETENTION_DAYS, as usage's hour rows), day rows two years.
 * Hour rows start at this day boundary; a question about earlier hours reads their day's row.
 */
export const hourRowsFrom = (now: number, hourKeepMs: number): number => {
  const t = now - hourKeepMs;
  return t - (t % OUTCOME_PERIODS.day);
};
export const DAY_ROWS_KEEP_MS = 730 * OUTCOME_PERIODS.day;

/** Deletes the hour and day rows past their keep; answers how many went. */
export async function pruneOutcomes<T extends OutcomeRow>(rows: Collection<T>, now: number, hourKeepMs: number): Promise<number> {
  const hours = await rows.deleteMany(ALL_TENANTS, { period: "hour", start: { $lt: hourRowsFrom(now, hourKeepMs) } });
  const days = await rows.deleteMany(ALL_TENANTS, { period: "day", start: { $lt: now - DAY_ROWS_KEEP_MS } });
  return hours + days;
}

/**
 * One node's counts on their way to the store: what is counted during one turn of the event loop
 * is summed per row and written at the end of the turn, one `increment` per row (a burst of a
 * thousand settled deliveries of one webhook costs two writes, not two thousand). A process killed
 * holds at most that one turn's counts, besides those whose write was in flight: at most the
 * attempts (or run ends) that completed in its last turn. A failed counter write is logged, never
 * thrown into the delivery or run it counts.
 */
export class Tally<T extends OutcomeRow> {
  private held = new Map<string, { row: T; inc: Record<string, number> }>();
  /** `latest` rows: the last attempt seen this turn, failures since the turn's last success (or all, with none). */
  private latest = new Map<string, { row: T; last: Required<Omit<LatestAttempt, "streak">>; failed: number; reset: boolean }>();
  private scheduled: NodeJS.Immediate | undefined;
  private readonly writing = new Set<Promise<void>>();

  /**
   * With `hourKeepMs`, the tally also prunes its rows past their keep, an hour apart (the first an
   * hour after it is made): the counters' owner prunes them, analytics only reads them. Its timer
   * does not hold the process open.
   */
  constructor(
    private readonly rows: Collection<T>,
    private readonly warn: (message: string, err: unknown) => void,
    hourKeepMs?: number,
  ) {
    if (hourKeepMs === undefined) return;
    const pruning = setInterval(() => {
      pruneOutcomes(rows, Date.now(), hourKeepMs).catch((err: unknown) =>
        warn("pruning outcome counts failed; the next pass retries", err),
      );
    }, OUTCOME_PERIODS.hour);
    pruning.unref();
  }

  add(rows: readonly T[], inc: Partial<Record<string, number>>): void {
    for (const row of rows) {
      let entry = this.held.get(row.id);
      if (!entry) {
        entry = { row, inc: {} };
        this.held.set(row.id, entry);
      }
      for (const [field, n] of Object.entries(inc)) if (n) entry.inc[field] = (entry.inc[field] ?? 0) + n;
    }
    this.scheduled ??= setImmediate(() => void this.flush());
  }

  /**
   * An attempt's end on `row` (a `latest` row): the row keeps the last one and the failures in a
   * row. Written with the turn's counts, one update per row however many attempts ended.
   */
  note(row: T, at: string, status_code: number | null, ok: boolean): void {
    let entry = this.latest.get(row.id);
    if (!entry) {
      entry = { row, last: { last_at: at, last_status_code: status_code, last_ok: ok }, failed: 0, reset: false };
      this.latest.set(row.id, entry);
    }
    if (at >= entry.last.last_at) entry.last = { last_at: at, last_status_code: status_code, last_ok: ok };
    if (ok) {
      entry.reset = true;
      entry.failed = 0;
    } else entry.failed += 1;
    this.scheduled ??= setImmediate(() => void this.flush());
  }

  /** Writes what is held now; resolves once every counter write asked for so far has answered. */
  async flush(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const batch = [...this.held.values()];
    this.held = new Map();
    const latest = [...this.latest.values()];
    this.latest = new Map();
    for (const { row, last, failed, reset } of latest) {
      // A success this turn restarts the streak at the failures after it; else they add to it.
      const update = reset ? { $set: { ...last, streak: failed } } : { $set: last, $inc: { streak: failed } };
      const scope = { org_id: row.org_id };
      const write: Promise<void> = this.rows
        .update(scope, { id: row.id }, update)
        .then(async (done) => {
          if (done) return;
          await this.rows.increment(row, { streak: 0 });
          await this.rows.update(scope, { id: row.id }, update);
        })
        .then(
          () => undefined,
          (err: unknown) => this.warn(`the last attempt of ${row.id} was not recorded`, err),
        )
        .finally(() => this.writing.delete(write));
      this.writing.add(write);
    }
    for (const { row, inc } of batch) {
      const write: Promise<void> = this.rows
        .increment(row, inc)
        .catch((err: unknown) => this.warn(`outcome counts of ${row.id} lost (${JSON.stringify(inc)})`, err))
        .finally(() => this.writing.delete(write));
      this.writing.add(write);
    }
    await Promise.all([...this.writing]);
  }
}
