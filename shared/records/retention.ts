import type { Context, ServiceBroker } from "moleculer";
import { encodeTime } from "ulid";
import type { IdPrefix } from "../ids";
import { ALL_TENANTS, type Collection, type Doc, type Filter, type IndexSpec } from "../storage/types";

/**
 * Retention (EVENT_RETENTION_DAYS): events, webhook deliveries and finished runs older than the
 * setting are deleted, each collection by the service that owns it (events: the events service;
 * deliveries: the webhook dispatcher, which creates them; runs: the workflows service).
 *
 * A prune walks the old documents oldest first along an indexed field (`id`, whose ULIDs sort by
 * creation time, or an indexed ISO time) in small batches: it reads the batch's last document (one
 * row), deletes the batch's range with a filter that re-checks, document by document and atomically,
 * that each may go (a settled delivery, an event no service still has to handle), and pauses before
 * the next batch, so no request waits long behind a delete. Several nodes pruning at once delete
 * the same ranges: whoever comes second deletes nothing.
 */
export const DAY_MS = 24 * 60 * 60 * 1000;
/** Documents per batch at most; fewer once a batch's delete takes long (large documents). */
export const PRUNE_BATCH_MAX = 500;
const PRUNE_BATCH_MIN = 10;
/** A batch's delete should take about this long; the batch size follows what the last one took. */
const BATCH_TARGET_MS = 20;
/** Pause between batches at least this long, and at least as long as the last delete took. */
const PAUSE_MS = 50;
/** A pass every few minutes, the first shortly after start; timers are jittered so nodes spread out. */
export const PRUNE_EVERY_MS = 5 * 60 * 1000;
const FIRST_PASS_MS = 20_000;

/** Run statuses of a finished run: the only runs retention removes. */
export { FINISHED_RUN_STATUSES } from "../api/wire";
export const RUNS_COLLECTION = "workflow_runs";
/**
 * Runs' retention indexes, declared by the workflows service and by the events service (which must
 * not prune an event an unfinished run started from): finished runs by when they ended (sparse: an
 * unfinished run's `finished_at` is null, so on SQLite the index holds finished runs only), and
 * event-started runs by their event (sparse: manual runs have no `trigger.event_id`).
 */
export const RUN_RETENTION_INDEXES: IndexSpec[] = [
  { fields: { finished_at: 1 }, sparse: true },
  { fields: { "trigger.event_id": 1 }, sparse: true },
];

/** What another service reads of a run to keep the event it started from. */
export interface RunRef extends Doc {
  status: string;
  trigger: { type: string; event_id?: string };
}

/** The time before which documents are old: `days` before `now`. */
export const retentionCutoff = (days: number, now: number): number => now - days * DAY_MS;

/** The smallest id `newId(prefix)` can make at `ms`: every id made before `ms` sorts below it. */
export const firstIdAt = (prefix: IdPrefix, ms: number): string =>
  // No id is made before 1970: a time before it is a floor below every id (ULIDs cannot encode it).
  `${prefix}_${encodeTime(Math.max(0, ms), 10).toLowerCase()}${"0".repeat(16)}`;

export interface PrunePlan<T extends Doc> {
  collection: Collection<T>;
  /** The indexed field batches are cut along, oldest first: `id` or an ISO time field. */
  field: string;
  /** Documents whose `field` sorts below this are old. */
  before: string;
  /** What an old document must also match to be deleted; the delete itself applies it. */
  removable: Filter;
  /**
   * Ids of old documents, among those whose `field` lies in `range` (a filter value), that other
   * collections still need: they are kept (checked just before the batch's delete).
   */
  stillNeeded?: (range: Filter[string]) => Promise<string[]>;
}

export interface PruneControl {
  /** Checked between batches: a stopping service ends its pass there. */
  stopped?: () => boolean;
  /** Override the pause between batches (tests). */
  pauseMs?: number;
}

const sleep = (ms: number) => new Promise<void>((ok) => setTimeout(ok, ms).unref());

/** Deletes what `plan` describes, batch after batch; answers how many documents went. */
export async function prune<T extends Doc>(plan: PrunePlan<T>, control: PruneControl = {}): Promise<number> {
  const { collection, field, before } = plan;
  let size = PRUNE_BATCH_MAX;
  let after: string | undefined;
  let removed = 0;
  for (;;) {
    const from = after === undefined ? {} : { $gt: after };
    // The batch's last document, read from the field's index: a batch costs its size, never a scan.
    const [last] = await collection.find(
      ALL_TENANTS,
      { [field]: { ...from, $lt: before } },
      { sort: { [field]: 1 }, skip: size - 1, limit: 1 },
    );
    const end = last === undefined ? undefined : (last as unknown as Record<string, unknown>)[field];
    if (end !== undefined && typeof end !== "string") throw new Error(`retention: ${collection.name}.${field} is not a string`);
    const range = end === undefined ? { ...from, $lt: before } : { ...from, $lte: end };
    const needed = plan.stillNeeded ? await plan.stillNeeded(range) : [];
    const filter: Filter = { ...plan.removable, [field]: range };
    if (needed.length > 0) filter.id = { ...(field === "id" ? range : {}), $nin: needed };
    const started = Date.now();
    removed += await collection.deleteMany(ALL_TENANTS, filter);
    const took = Date.now() - started;
    if (end === undefined || control.stopped?.()) return removed;
    after = end;
    if (took > 2 * BATCH_TARGET_MS) size = Math.max(PRUNE_BATCH_MIN, Math.floor(size / 2));
    else if (took < BATCH_TARGET_MS / 2) size = Math.min(PRUNE_BATCH_MAX, size * 2);
    await sleep(control.pauseMs ?? Math.max(PAUSE_MS, took));
  }
}

/**
 * Runs a service's prune pass every few minutes and once shortly after start (unref'd timers); a
 * pass asked for while one runs joins it. `stop` ends the pass in flight at its next batch.
 */
export class Pruner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopping = false;

  constructor(
    private readonly what: string,
    /** One pass deleting what is past retention as of `now` (epoch ms). */
    private readonly pass: (now: number, control: PruneControl) => Promise<number>,
    private readonly logger: ServiceBroker["logger"],
  ) {}

  start(): void {
    this.schedule(FIRST_PASS_MS * (1 + Math.random()));
  }

  /** One pass now (also what the timer runs); answers how many documents it deleted. */
  run(control: Omit<PruneControl, "stopped"> = {}): Promise<number> {
    this.running ??= this.pass(Date.now(), { ...control, stopped: () => this.stopping })
      .then((n) => {
        if (n > 0) this.logger.info(`retention: pruned ${n} ${this.what}`);
        return n;
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }

  /** One pass as of `now` (operators and tests move the clock): not the timer's, and not logged. */
  asOf(now: number): Promise<number> {
    return this.pass(now, { stopped: () => this.stopping });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  private schedule(ms: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      void this.run()
        .catch((err) => this.logger.warn(`retention: pruning ${this.what} failed; the next pass retries`, err))
        .finally(() => this.schedule(PRUNE_EVERY_MS * (0.8 + 0.4 * Math.random())));
    }, ms);
    this.timer.unref();
  }
}

/**
 * The internal `prune` action of a service that keeps a `pruner` (operators, tests): one retention
 * pass now, or as of `now` when given; answers how many documents went.
 */
export const pruneAction = {
  visibility: "public" as const,
  params: { $$strict: true, now: { type: "number" as const, integer: true, optional: true } },
  handler(this: { pruner: Pruner }, ctx: Context<{ now?: number }>): Promise<number> {
    const now = ctx.params.now;
    return now === undefined ? this.pruner.run() : this.pruner.asOf(now);
  },
};
