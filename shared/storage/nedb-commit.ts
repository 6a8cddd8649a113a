import { closeSync, openSync, writeSync } from "node:fs";
import type Datastore from "@seald-io/nedb";

interface Persistence {
  filename: string;
  inMemoryOnly: boolean;
  persistNewStateAsync(docs: unknown[]): Promise<void>;
  persistCachedDatabaseAsync(): Promise<void>;
}

/**
 * Group commit for one nedb file. nedb appends each write to its file (open, write and close, three
 * trips to libuv's thread pool) before it takes the next operation, so a collection managed about
 * 2,500 writes/s here however many callers waited, and the process sat idle between trips. Here
 * nedb's executor hands its lines over and moves on; the lines of one event-loop turn go to the file
 * in one append on a descriptor kept open; and `durable()` resolves once everything queued before it
 * is in the file. Each collection operation awaits `durable()` before answering, so an acknowledged
 * write is on disk exactly as before (appended, as nedb does, without fsync), only many at a time.
 * The append is synchronous: a few kilobytes into the page cache cost less than the round trip.
 */
export class GroupCommit {
  private queued: string[] = [];
  private waiting: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private scheduled = false;
  private fd: number | undefined;

  constructor(private readonly persistence: Persistence) {
    const rewrite = persistence.persistCachedDatabaseAsync.bind(persistence);
    persistence.persistNewStateAsync = async (docs) => {
      if (persistence.inMemoryOnly) return;
      // Plain JSON: documents hold JSON values only (see Doc), and nedb's loader reads it back.
      // nedb's own serializer runs a replacer on every value to turn Dates into {$$date}: 7 % of
      // a busy dispatcher's time.
      for (const doc of docs) this.queued.push(`${JSON.stringify(doc)}\n`);
      this.schedule();
    };
    // Compaction rewrites the file from memory (which already holds the queued writes) and renames
    // it into place: flush first, and reopen afterwards, so no append goes to the replaced file.
    persistence.persistCachedDatabaseAsync = async () => {
      this.flush();
      this.release();
      await rewrite();
    };
  }

  static attach(ds: Datastore<any>): GroupCommit {
    return new GroupCommit((ds as unknown as { persistence: Persistence }).persistence);
  }

  /** Resolves once every write queued so far is in the file. */
  durable(): Promise<void> {
    if (this.queued.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const waiters = this.waiting;
    this.waiting = [];
    if (this.queued.length === 0) {
      for (const w of waiters) w.resolve();
      return;
    }
    const lines = this.queued.join("");
    this.queued = [];
    try {
      this.fd ??= openSync(this.persistence.filename, "a", 0o644);
      writeSync(this.fd, lines);
      for (const w of waiters) w.resolve();
    } catch (err) {
      this.release();
      for (const w of waiters) w.reject(err);
    }
  }

  private release(): void {
    if (this.fd === undefined) return;
    try {
      closeSync(this.fd);
    } finally {
      this.fd = undefined;
    }
  }
}
