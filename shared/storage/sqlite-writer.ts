import { join } from "node:path";
import type { DatabaseSync } from "node:sqlite";
import { Worker } from "node:worker_threads";
import { ApiError } from "../errors";
import type { CheckpointerData } from "./sqlite-checkpointer.cjs";

/** Operations of one transaction at most, so no batch holds the write lock (or this thread) for long. */
const MAX_BATCH = 256;
/** How long a write keeps trying for another process's write lock before it answers 503. */
export const BUSY_GIVE_UP_MS = 10_000;

/**
 * Checkpoints (copying the WAL back into the database file, and its fsync) run on a thread of their
 * own, never in a committing write on the event loop, where each stalled the process ~10 ms. Every
 * CHECKPOINT_MS a PASSIVE one copies what it can without taking any lock writers need. Under steady
 * writes that never lets the WAL start over (new frames keep arriving behind it), so once the file
 * is past WAL_RESTART_BYTES a RESTART follows: it takes the write lock for the short rest (the event
 * loop's writers meanwhile retry, as for any other process's lock) and the next write starts the WAL
 * from its beginning, which keeps it at about that size.
 */
const CHECKPOINT_MS = 250;
const WAL_RESTART_BYTES = 16 * 1024 * 1024;

/** SQLite's primary result codes that matter here (the extended code's low byte). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
export const SQLITE_CONSTRAINT = 19;

export const primaryCode = (err: unknown): number | undefined => {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === "number" ? code & 0xff : undefined;
};
export const isBusy = (err: unknown) => {
  const code = primaryCode(err);
  return code === SQLITE_BUSY || code === SQLITE_LOCKED;
};

const REASONS: Record<number, string> = {
  5: "the database is busy",
  8: "the database is read-only",
  10: "a disk I/O error",
  11: "the database file is damaged",
  13: "the disk is full",
  14: "the database file cannot be opened",
  26: "the database file is not a database",
};

/** A failure of the store itself (disk full, I/O): the client may retry; nothing was applied. */
export function storageUnavailable(err: unknown): ApiError {
  const reason = REASONS[primaryCode(err) ?? -1] ?? "a storage error";
  return new ApiError("storage_unavailable", `The store could not complete the operation (${reason}); nothing was changed, retry later`, {
    retry_after: 1,
    reason,
  });
}

/**
 * Runs writes in batches: the writes asked for during one turn of the event loop go into one
 * transaction (up to MAX_BATCH), committed at the end of the turn. A transaction never waits for
 * another process's lock on this thread: when the file is locked, the batch is tried again a few
 * milliseconds later. A write that fails for the store's sake (disk full, I/O) fails its whole batch,
 * rolled back: nothing of it is applied, and nothing is reported as written.
 */
export class Writer {
  private queue: { run: () => unknown; ok: (value: unknown) => void; fail: (err: unknown) => void }[] = [];
  private scheduled = false;
  private busySince: number | undefined;
  private idleWaiters: (() => void)[] = [];
  private warnedAt = -Infinity;

  constructor(
    private readonly db: DatabaseSync,
    /** Runs first in every transaction, with the write lock held. */
    private readonly began: () => void,
  ) {}

  submit<T>(run: () => T): Promise<T> {
    return new Promise<T>((ok, fail) => {
      this.queue.push({ run, ok: ok as (value: unknown) => void, fail });
      this.schedule(0);
    });
  }

  /** Resolves once every write asked for so far has been answered. */
  idle(): Promise<void> {
    if (this.queue.length === 0 && !this.scheduled) return Promise.resolve();
    return new Promise((ok) => this.idleWaiters.push(ok));
  }

  private schedule(delayMs: number): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const go = () => {
      this.scheduled = false;
      this.flush();
    };
    if (delayMs > 0) setTimeout(go, delayMs);
    else setImmediate(go);
  }

  private flush(): void {
    if (this.queue.length > 0) this.runBatch();
    if (this.queue.length > 0) return this.schedule(this.busySince === undefined ? 0 : 0.5 + Math.random() * 1.5);
    for (const waiter of this.idleWaiters.splice(0)) waiter();
  }

  private runBatch(): void {
    try {
      this.db.exec("BEGIN IMMEDIATE");
    } catch (err) {
      if (isBusy(err)) {
        this.busySince ??= Date.now();
        if (Date.now() - this.busySince < BUSY_GIVE_UP_MS) return;
      }
      this.busySince = undefined;
      const failed = storageUnavailable(err);
      for (const op of this.queue.splice(0)) op.fail(failed);
      return;
    }
    this.busySince = undefined;
    const batch = this.queue.splice(0, MAX_BATCH);
    try {
      this.began();
    } catch (err) {
      this.db.exec("ROLLBACK");
      const failed = storageUnavailable(err);
      for (const op of batch) op.fail(failed);
      return;
    }
    const results: { ok: boolean; value: unknown }[] = [];
    try {
      for (const op of batch) {
        try {
          results.push({ ok: true, value: op.run() });
        } catch (err) {
          // A refused write (a unique index, a bad update) changed nothing: its statement was undone
          // alone. Anything else from SQLite is the store failing: the whole batch goes.
          if (primaryCode(err) !== undefined && primaryCode(err) !== SQLITE_CONSTRAINT) throw err;
          results.push({ ok: false, value: err });
        }
      }
      this.db.exec("COMMIT");
    } catch (err) {
      if (this.db.isTransaction) this.db.exec("ROLLBACK");
      if (isBusy(err)) {
        // Another process's checkpoint or lock: nothing was applied, so try the batch again.
        this.busySince = Date.now();
        this.queue.unshift(...batch);
        return;
      }
      const failed = storageUnavailable(err);
      // Once a minute at most: a full disk fails every batch, and each is answered 503 anyway.
      if (Date.now() - this.warnedAt >= 60_000) {
        this.warnedAt = Date.now();
        process.emitWarning(`storage: a write batch failed and was rolled back: ${(err as Error).message}`);
      }
      for (const op of batch) op.fail(failed);
      return;
    }
    batch.forEach((op, i) => (results[i].ok ? op.ok(results[i].value) : op.fail(results[i].value)));
  }
}

/**
 * The checkpoint thread's module beside this one: `sqlite-checkpointer.cjs` as compiled into dist/,
 * or its source `.cts` where this file runs as TypeScript (jest), which Node runs with its types stripped.
 */
export const CHECKPOINTER_FILE = join(__dirname, __filename.endsWith(".ts") ? "sqlite-checkpointer.cts" : "sqlite-checkpointer.cjs");

/** Starts the checkpoint thread of the database `file` (see CHECKPOINT_MS); it never keeps the process alive. */
export function startCheckpointer(file: string): Worker {
  const workerData: CheckpointerData = { file, everyMs: CHECKPOINT_MS, restartBytes: WAL_RESTART_BYTES };
  const worker = new Worker(CHECKPOINTER_FILE, { workerData });
  worker.unref();
  worker.on("error", (err) => process.emitWarning(`storage: the checkpoint thread failed: ${err.message}`));
  return worker;
}
