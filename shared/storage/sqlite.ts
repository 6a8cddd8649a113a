import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { join, resolve } from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import type { Worker } from "node:worker_threads";
import { ApiError } from "../errors";
import { checkUpdate } from "./scope";
import { SqliteCollection } from "./sqlite-collection";
import type { SqliteHost } from "./sqlite-schema";
import { BUSY_GIVE_UP_MS, isBusy, primaryCode, startCheckpointer, storageUnavailable, Writer } from "./sqlite-writer";
import { COLLECTION_NAME, type AtomicWrite, type Collection, type Doc, type IndexSpec, type Store } from "./types";

/** The database file under DATA_DIR; SQLite keeps `-wal` and `-shm` beside it. */
export const DATABASE_FILE = "store.db";

/** Statements kept prepared per connection; filter shapes are few, so this is never reached in use. */
const MAX_STATEMENTS = 1000;

/**
 * The embedded store: one SQLite database file (`DATA_DIR/store.db`, mode 0600, WAL) that any number
 * of processes on the machine open at once; SQLite's locking makes each compare-and-set atomic across
 * them. A collection is a table of JSON documents (`doc`) beside real columns for `id`, `org_id` and
 * the environment, with an index per `IndexSpec` on the JSON fields it names.
 */
export class SqliteStore implements Store, SqliteHost {
  readonly file: string;
  readonly db: DatabaseSync;
  readonly writer: Writer;
  private readonly collections = new Map<string, SqliteCollection<any>>();
  private readonly statements = new Map<string, StatementSync>();
  private readonly checkpointer: Worker;
  private closing: Promise<void> | undefined;

  constructor(dir: string) {
    const root = resolve(dir);
    mkdirSync(root, { recursive: true, mode: 0o700 });
    this.file = join(root, DATABASE_FILE);
    // Created private before SQLite opens it; its -wal and -shm files take the same mode.
    closeSync(openSync(this.file, "a", 0o600));
    chmodSync(this.file, 0o600);
    this.db = new DatabaseSync(this.file, { timeout: 5000 });
    // Waiting for another process's lock is allowed only here, while opening (the switch to WAL
    // needs it); from now on a locked file is retried without blocking the event loop.
    this.db.exec("PRAGMA journal_mode = WAL");
    this.db.exec("PRAGMA synchronous = NORMAL");
    this.db.exec("PRAGMA busy_timeout = 0");
    this.db.exec("PRAGMA wal_autocheckpoint = 0");
    this.writer = new Writer(this.db, () => {
      // No process can change the schema while this one holds the write lock.
      this.version = this.readVersion();
      this.versionFresh = true;
    });
    this.checkpointer = startCheckpointer(this.file);
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    if (this.closing) throw new ApiError("service_unavailable", "The store is closed", { retry_after: 1 });
    let col = this.collections.get(name) as SqliteCollection<T> | undefined;
    if (!col) {
      if (!COLLECTION_NAME.test(name)) throw new ApiError("internal_error", `storage: invalid collection name '${name}'`);
      col = new SqliteCollection<T>(name, this, indexes);
      this.collections.set(name, col);
    } else {
      col.declare(indexes);
    }
    return col;
  }

  private version = -1;
  private versionFresh = false;

  private readVersion(): number {
    return (this.statement("PRAGMA schema_version").get() as { schema_version: number }).schema_version;
  }

  /**
   * SQLite's schema cookie, which changes whenever any process changes the file's schema: read in
   * every write transaction (where it cannot change under us) and at most once per event-loop turn
   * for reads (a read in the turn of another process's schema change may filter on its previous
   * layout; the documents it returns are whole either way).
   */
  schemaVersion(): number {
    if (!this.versionFresh) {
      this.version = this.readVersion();
      this.versionFresh = true;
      setImmediate(() => (this.versionFresh = false));
    }
    return this.version;
  }

  /** The prepared statement of `sql`, made once; `arrays`: its rows come as arrays (set when made). */
  statement(sql: string, arrays = false): StatementSync {
    const key = arrays ? `${sql}\n[]` : sql;
    let stmt = this.statements.get(key);
    if (!stmt) {
      if (this.statements.size >= MAX_STATEMENTS) this.statements.clear();
      stmt = this.db.prepare(sql);
      if (arrays) stmt.setReturnArrays(true);
      this.statements.set(key, stmt);
    }
    return stmt;
  }

  /** A read: run now; a file locked by another process is tried again shortly (never waited for here). */
  async read<R>(run: () => R): Promise<R> {
    const started = Date.now();
    for (;;) {
      if (this.closing) throw new ApiError("service_unavailable", "The store is closed", { retry_after: 1 });
      try {
        return run();
      } catch (err) {
        if (primaryCode(err) === undefined) throw err;
        if (!isBusy(err) || Date.now() - started > BUSY_GIVE_UP_MS) throw storageUnavailable(err);
      }
      await new Promise((ok) => setTimeout(ok, 1 + Math.random() * 4));
    }
  }

  /** See Store.atomically: one savepoint in one writer transaction. */
  async atomically(writes: AtomicWrite[]): Promise<Doc[] | null> {
    // By name: a caller may hold a wrapper of the collection (an instrumented store in tests).
    const collections = writes.map((w) => {
      const col = this.collections.get(w.collection.name) as SqliteCollection<Doc> | undefined;
      if (!col) throw new ApiError("internal_error", `storage: '${w.collection.name}' is not a collection of this store`);
      return col;
    });
    const updates = writes.map((w) => (w.op === "update" ? checkUpdate(w.update) : undefined));
    await Promise.all([...new Set(collections)].map((c) => c.prepare()));
    return this.writer.submit(() => {
      const db = this.db;
      db.exec("SAVEPOINT atomically");
      try {
        const out: Doc[] = [];
        for (const [i, write] of writes.entries()) {
          if (write.op === "insert") {
            collections[i].insertNow(write.doc);
            out.push(write.doc);
            continue;
          }
          const doc = collections[i].updateNow(write.scope, write.filter, updates[i]!);
          if (!doc) {
            db.exec("ROLLBACK TO atomically");
            db.exec("RELEASE atomically");
            return null;
          }
          out.push(doc);
        }
        db.exec("RELEASE atomically");
        return out;
      } catch (err) {
        if (db.isTransaction) {
          db.exec("ROLLBACK TO atomically");
          db.exec("RELEASE atomically");
        }
        throw err;
      }
    });
  }

  /**
   * A small real write, through the writer like every other: one row of `_probe` (no collection's
   * name can start with `_`), upserted. It fails as any write of its batch would (`storage_unavailable`
   * on a full disk), so a readiness check that uses it tells whether writes are being stored.
   */
  probe(): Promise<void> {
    if (this.closing) return Promise.reject(new ApiError("service_unavailable", "The store is closed", { retry_after: 1 }));
    const at = new Date().toISOString();
    return this.writer.submit(() => {
      this.db.exec("CREATE TABLE IF NOT EXISTS _probe (id INTEGER PRIMARY KEY, at TEXT NOT NULL)");
      this.statement("INSERT INTO _probe (id, at) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET at = excluded.at").run(at);
    });
  }

  /** The file is open once constructed (a failure to open it throws there). */
  opened(): Promise<void> {
    return Promise.resolve();
  }

  /** Answers every write asked for, then closes the file (the last process to close checkpoints it). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.writer.idle();
      // Held (ref) until it has closed its connection, so this process waits for it.
      this.checkpointer.ref();
      const stopped = new Promise((done) => this.checkpointer.once("exit", done));
      this.checkpointer.postMessage("stop");
      await stopped;
      this.statements.clear();
      this.db.close();
    })();
    return this.closing;
  }
}
