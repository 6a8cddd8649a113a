/**
 * Work queued by key (a webhook), run with at most `perKey` items of one key and `total` items in
 * all at once. Keys take turns for free slots, so one slow or dead receiver holds at most `perKey`
 * slots and never delays the others' deliveries.
 */
export class Lanes<T> {
  private readonly queues = new Map<string, T[]>();
  private readonly running = new Map<string, number>();
  /** Keys with queued work and a free per-key slot, in turn order. */
  private readonly ready = new Set<string>();
  private active = 0;
  private queued = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly perKey: number,
    private readonly total: number,
    private readonly run: (item: T) => Promise<void>,
  ) {}

  /** Items queued or running. */
  get size(): number {
    return this.active + this.queued;
  }

  push(key: string, item: T): void {
    let queue = this.queues.get(key);
    if (!queue) this.queues.set(key, (queue = []));
    queue.push(item);
    this.queued += 1;
    if ((this.running.get(key) ?? 0) < this.perKey) this.ready.add(key);
    this.pump();
  }

  /** Removes and returns everything not yet started (a stopping node hands it back). */
  takeQueued(): T[] {
    const items = [...this.queues.values()].flat();
    this.queues.clear();
    this.ready.clear();
    this.queued = 0;
    return items;
  }

  /** Resolves when nothing runs any more. */
  idle(): Promise<void> {
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.active < this.total && this.ready.size > 0) {
      const key = this.ready.values().next().value as string;
      this.ready.delete(key);
      const queue = this.queues.get(key) as T[];
      const item = queue.shift() as T;
      this.queued -= 1;
      if (queue.length === 0) this.queues.delete(key);
      const running = (this.running.get(key) ?? 0) + 1;
      this.running.set(key, running);
      this.active += 1;
      // Back of the line: other keys get the next free slots.
      if (queue.length > 0 && running < this.perKey) this.ready.add(key);
      void this.run(item).finally(() => this.done(key));
    }
  }

  private done(key: string): void {
    this.active -= 1;
    const running = (this.running.get(key) ?? 1) - 1;
    if (running === 0) this.running.delete(key);
    else this.running.set(key, running);
    if (this.queues.has(key)) this.ready.add(key);
    this.pump();
    if (this.active === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }
}
