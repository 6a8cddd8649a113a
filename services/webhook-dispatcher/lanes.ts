/**
 * Work queued by key (a webhook), run with at most `perKey` items of one key and `total` items in
 * all at once. Keys take turns for free slots, so one slow or dead receiver holds at most `perKey`
 * slots and never delays the others' deliveries.
 *
 * A key may have a rate (items started per second, a webhook's `rate_limit`): each start of it first
 * reserves a start time from `reserve` (by default here in memory; the dispatcher's is shared by all
 * its nodes, see throttle.ts), so starts are spaced at least 1/rate apart and never come in a burst.
 * An item waiting for its start time holds no slot, and its attempt's clock has not started. A
 * throttled key keeps at most `rate × QUEUE_SECONDS` items in memory (`room`); the rest stay pending
 * in the store, due at the times `nextSlot` hands out, which follow the same rate.
 */
interface Lane<T> {
  queue: T[];
  running: number;
  /** Starts per second; null: as fast as slots free up. */
  rate: number | null;
  /** A reservation is under way. */
  reserving: boolean;
  /** The reserved start time (epoch ms) of the key's next item. */
  startAt: number | undefined;
  /** The next start time (epoch ms) `nextSlot` hands out for this key's deliveries kept in the store. */
  cursor: number;
  /** Wakes the key at its reserved start time. */
  timer: NodeJS.Timeout | undefined;
}

/** How many seconds of a throttled key's sends are kept in memory; the rest wait in the store. */
export const QUEUE_SECONDS = 2;

/** Reserves a start time (epoch ms) for `item` of `key`, at most `rate` per second. */
export type Reserve<T> = (key: string, item: T, rate: number) => Promise<number>;

/** Start times spaced 1/rate apart per key, in this process only. */
export function localReserve<T>(): Reserve<T> {
  const next = new Map<string, number>();
  return (key, _item, rate) => {
    const at = Math.max(next.get(key) ?? 0, Date.now());
    next.set(key, at + 1000 / rate);
    return Promise.resolve(at);
  };
}

export class Lanes<T> {
  private readonly lanes = new Map<string, Lane<T>>();
  /** Keys with queued work and a free per-key slot, in turn order. */
  private readonly ready = new Set<string>();
  private active = 0;
  private queued = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly perKey: number,
    private readonly total: number,
    private readonly run: (item: T) => Promise<void>,
    private readonly reserve: Reserve<T> = localReserve<T>(),
  ) {}

  /** Items queued or running. */
  get size(): number {
    return this.active + this.queued;
  }

  /** Queues `item`; `rate` (when given) sets the key's rate, null lifts it. */
  push(key: string, item: T, rate?: number | null): void {
    const lane = this.laneOf(key);
    if (rate !== undefined) this.setRate(key, rate);
    lane.queue.push(item);
    this.queued += 1;
    if (lane.running < this.perKey) this.ready.add(key);
    this.pump();
  }

  setRate(key: string, rate: number | null): void {
    const next = rate !== null && rate > 0 ? rate : null;
    // No lane is kept for a key with neither work nor a rate.
    if (next === null && !this.lanes.has(key)) return;
    const lane = this.laneOf(key);
    if (lane.rate === next) return;
    lane.rate = next;
    if (next === null) lane.cursor = 0;
  }

  /** How many more items the key may take into memory (no bound for a key without a rate). */
  room(key: string): number {
    const lane = this.lanes.get(key);
    if (!lane || lane.rate === null) return Infinity;
    return Math.max(0, Math.max(1, Math.ceil(lane.rate * QUEUE_SECONDS)) - lane.queue.length);
  }

  /**
   * For a throttled key without room: when (epoch ms) one more of its items should fall due in the
   * store, after those in memory (and `ahead` more about to be) and those already given a slot.
   */
  nextSlot(key: string, now = Date.now(), ahead = 0): number {
    const lane = this.laneOf(key);
    const gap = 1000 / (lane.rate ?? 1);
    const at = Math.max(lane.cursor, now + (lane.queue.length + ahead) * gap);
    lane.cursor = at + gap;
    return Math.round(at);
  }

  /** Whether the key's rate is known here (it has a lane). */
  knows(key: string): boolean {
    return this.lanes.has(key);
  }

  /** Removes and returns everything not yet started (a stopping node hands it back). */
  takeQueued(): T[] {
    const items: T[] = [];
    for (const lane of this.lanes.values()) {
      items.push(...lane.queue.splice(0));
      clearTimeout(lane.timer);
      lane.timer = undefined;
    }
    this.ready.clear();
    this.queued = 0;
    return items;
  }

  /** Resolves when nothing runs any more. */
  idle(): Promise<void> {
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private laneOf(key: string): Lane<T> {
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = { queue: [], running: 0, rate: null, reserving: false, startAt: undefined, cursor: 0, timer: undefined };
      this.lanes.set(key, lane);
    }
    return lane;
  }

  /** Whether forgetting the lane loses nothing: no rate, or no start reserved and no slot handed out ahead. */
  private rested(lane: Lane<T>): boolean {
    if (lane.rate === null) return true;
    return !lane.reserving && lane.startAt === undefined && lane.cursor <= Date.now();
  }

  /**
   * For a throttled key: true when its reserved start time has come (and uses it up); otherwise
   * reserves one, or waits for it, and answers false.
   */
  private admitted(key: string, lane: Lane<T>): boolean {
    if (lane.rate === null) return true;
    if (lane.startAt !== undefined && lane.startAt <= Date.now()) {
      lane.startAt = undefined;
      return true;
    }
    if (lane.startAt !== undefined) this.wakeAt(key, lane, lane.startAt);
    else if (!lane.reserving) {
      lane.reserving = true;
      const rate = lane.rate;
      this.reserve(key, lane.queue[0], rate).then(
        (at) => {
          lane.reserving = false;
          lane.startAt = at;
          this.wakeAt(key, lane, at);
        },
        // The store failing: try again one gap later (sending nothing meanwhile keeps the limit).
        () => {
          lane.reserving = false;
          this.wakeAt(key, lane, Date.now() + 1000 / rate);
        },
      );
    }
    return false;
  }

  private wakeAt(key: string, lane: Lane<T>, at: number): void {
    if (lane.timer) return;
    lane.timer = setTimeout(
      () => {
        lane.timer = undefined;
        if (lane.queue.length > 0 && lane.running < this.perKey) this.ready.add(key);
        this.pump();
      },
      Math.max(0, at - Date.now()),
    );
    lane.timer.unref();
  }

  private pump(): void {
    while (this.active < this.total && this.ready.size > 0) {
      const key = this.ready.values().next().value as string;
      this.ready.delete(key);
      const lane = this.lanes.get(key) as Lane<T>;
      if (lane.queue.length === 0 || lane.running >= this.perKey || !this.admitted(key, lane)) continue;
      const item = lane.queue.shift() as T;
      this.queued -= 1;
      lane.running += 1;
      this.active += 1;
      // Back of the line: other keys get the next free slots.
      if (lane.queue.length > 0 && lane.running < this.perKey) this.ready.add(key);
      void this.run(item).finally(() => this.done(key, lane));
    }
  }

  private done(key: string, lane: Lane<T>): void {
    this.active -= 1;
    lane.running -= 1;
    if (lane.queue.length > 0) this.ready.add(key);
    // An idle key is forgotten, unless its rate still spaces its starts or the slots handed out for the store.
    else if (lane.running === 0 && !lane.timer && this.rested(lane)) this.lanes.delete(key);
    this.pump();
    if (this.active === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}
