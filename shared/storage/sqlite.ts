import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { join, resolve } from "node:path";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import { ApiError, DuplicateKeyError } from "../errors";
import { checkUpdate, scoped } from "./scope";
import { applyUpdate } from "./update";
import { COLLECTION_NAME, type Collection, type Doc, type Filter, type FindOptions, type IndexSpec, type Page, type Scope, type Store, type Update } from "./types";

/** The database file under DATA_DIR; SQLite keeps `-wal` and `-shm` beside it. */
export const DATABASE_FILE = "store.db";

/** Operations of one transaction at most, so no batch holds the write lock (or this thread) for long. */
const MAX_BATCH = 256;
/** How long a write keeps trying for another process's write lock before it answers 503. */
const BUSY_GIVE_UP_MS = 10_000;
/** Statements kept prepared per connection; filter shapes are few, so this is never reached in use. */
const MAX_STATEMENTS = 1000;

type Row = { rid: number; doc: string };

/** SQLite's primary result codes that matter here (the extended code's low byte). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
const SQLITE_CONSTRAINT = 19;

const primaryCode = (err: unknown): number | undefined => {
  const code = (err as { errcode?: unknown } | null)?.errcode;
  return typeof code === "number" ? code & 0xff : undefined;
};
const isBusy = (err: unknown) => {
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

/** Field names the services filter and sort on: dotted identifiers, never data from a request. */
const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/** The SQL expression of a document field: the real columns for the three every query uses. */
function column(path: string): string {
  if (path === "id") return "id";
  if (path === "org_id") return "org_id";
  if (path === "environment") return "env";
  if (!PATH.test(path)) throw new ApiError("internal_error", `storage: '${path}' is not a field path`);
  return `json_extract(doc, '$.${path}')`;
}
const jsonType = (path: string) => `json_type(doc, '$.${path}')`;
const isColumn = (path: string) => path === "id" || path === "org_id" || path === "environment";

interface Sql {
  where: string[];
  params: SQLInputValue[];
}

function scalar(path: string, value: unknown): SQLInputValue {
  if (typeof value === "string" || (typeof value === "number" && Number.isFinite(value))) return value;
  throw new ApiError("internal_error", `storage: cannot compare '${path}' with ${JSON.stringify(value)}`);
}

/** `path = value` with JSON's types kept apart (a boolean is not the number 1; null is also absent). */
function equals(sql: Sql, path: string, value: unknown): string {
  if (value === null) return `${column(path)} IS NULL`;
  if (typeof value === "boolean") return isColumn(path) ? "0" : `${jsonType(path)} = '${value}'`;
  sql.params.push(scalar(path, value));
  return `${column(path)} = ?`;
}

function within(sql: Sql, path: string, values: unknown[]): string {
  const plain = values.filter((v) => v !== null && typeof v !== "boolean").map((v) => scalar(path, v));
  const parts = values.filter((v) => v === null || typeof v === "boolean").map((v) => equals(sql, path, v));
  if (plain.length > 0) {
    sql.params.push(JSON.stringify(plain));
    parts.push(`${column(path)} IN (SELECT value FROM json_each(?))`);
  }
  return parts.length === 0 ? "0" : `(${parts.join(" OR ")})`;
}

const RANGE = { $lt: "<", $lte: "<=", $gt: ">", $gte: ">=" } as const;

/** A range only compares values of the same JSON type, as MongoDB does. */
function range(sql: Sql, path: string, op: keyof typeof RANGE, value: unknown): string {
  sql.params.push(scalar(path, value));
  const types = typeof value === "number" ? "('integer', 'real')" : "('text')";
  return `(${column(path)} ${RANGE[op]} ? AND typeof(${column(path)}) IN ${types})`;
}

/** Compiles a filter (see `Filter`) into SQL conditions and their parameters. */
function compile(scope: Scope, filter: Filter): Sql {
  const sql: Sql = { where: [], params: [] };
  for (const [path, cond] of Object.entries(scoped(scope, filter))) {
    if (cond === null || typeof cond !== "object" || Array.isArray(cond)) {
      sql.where.push(equals(sql, path, cond));
      continue;
    }
    for (const [op, value] of Object.entries(cond)) {
      switch (op) {
        case "$in":
          sql.where.push(within(sql, path, value as unknown[]));
          break;
        case "$nin":
          sql.where.push(`NOT COALESCE(${within(sql, path, value as unknown[])}, 0)`);
          break;
        case "$ne":
          sql.where.push(`NOT COALESCE(${equals(sql, path, value)}, 0)`);
          break;
        case "$lt":
        case "$lte":
        case "$gt":
        case "$gte":
          sql.where.push(range(sql, path, op, value));
          break;
        case "$exists":
          sql.where.push(`${isColumn(path) ? column(path) : jsonType(path)} IS ${value ? "NOT " : ""}NULL`);
          break;
        default:
          throw new ApiError("internal_error", `storage: unsupported operator '${op}'`);
      }
    }
  }
  return sql;
}

const whereOf = (sql: Sql) => (sql.where.length > 0 ? ` WHERE ${sql.where.join(" AND ")}` : "");
const orderOf = (sort: FindOptions["sort"]) =>
  sort && Object.keys(sort).length > 0
    ? ` ORDER BY ${Object.entries(sort)
        .map(([path, dir]) => `${column(path)} ${dir < 0 ? "DESC" : "ASC"}`)
        .join(", ")}`
    : "";

const parse = <T>(row: { doc: string } | undefined): T | null => (row ? (JSON.parse(row.doc) as T) : null);

/**
 * Runs writes in batches: the writes asked for during one turn of the event loop go into one
 * transaction (up to MAX_BATCH), committed at the end of the turn. A transaction never waits for
 * another process's lock on this thread: when the file is locked, the batch is tried again a few
 * milliseconds later. A write that fails for the store's sake (disk full, I/O) fails its whole batch,
 * rolled back: nothing of it is applied, and nothing is reported as written.
 */
class Writer {
  private queue: { run: () => unknown; ok: (value: unknown) => void; fail: (err: unknown) => void }[] = [];
  private scheduled = false;
  private busySince: number | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly db: DatabaseSync) {}

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
    if (this.queue.length > 0) return this.schedule(this.busySince === undefined ? 0 : 1 + Math.random() * 4);
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
      process.emitWarning(`storage: a write batch failed and was rolled back: ${(err as Error).message}`);
      for (const op of batch) op.fail(failed);
      return;
    }
    batch.forEach((op, i) => (results[i].ok ? op.ok(results[i].value) : op.fail(results[i].value)));
  }
}

class SqliteCollection<T extends Doc> implements Collection<T> {
  private readonly table: string;
  private readonly uniqueFields = new Map<string, string[]>();
  private readonly declared = new Set<string>();
  /** The collection's schema statements, and how many of them are in the file. */
  private readonly schema: string[];
  private applied = 0;
  private applying: Promise<void> | undefined;

  constructor(
    readonly name: string,
    private readonly store: SqliteStore,
    indexes: IndexSpec[],
  ) {
    this.table = `"${name}"`;
    this.schema = [`CREATE TABLE IF NOT EXISTS ${this.table} (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, org_id TEXT, env TEXT, doc TEXT NOT NULL)`];
    this.declare(indexes);
  }

  /**
   * Creates what is declared and not yet in the file, before any operation. Schema changes go
   * through the writer like any write; one that failed (a full disk) is tried again by the next
   * operation.
   */
  private async ready(): Promise<void> {
    while (this.applied < this.schema.length) {
      this.applying ??= (async () => {
        const from = this.applied;
        const statements = this.schema.slice(from);
        try {
          await this.store.writer.submit(() => statements.forEach((s) => this.store.db.exec(s)));
          this.applied = from + statements.length;
        } finally {
          this.applying = undefined;
        }
      })();
      await this.applying;
    }
  }

  declare(indexes: IndexSpec[]): void {
    for (const index of indexes) {
      const fields = Object.entries(index.fields);
      const name = `${this.name}__${fields.map(([f, d]) => `${f.replace(/\./g, "_")}${d < 0 ? "_desc" : ""}`).join("__")}${index.unique ? "__u" : ""}${index.sparse ? "__s" : ""}`;
      if (this.declared.has(name)) continue;
      this.declared.add(name);
      if (index.unique) this.uniqueFields.set(name, fields.map(([f]) => f));
      const columns = fields.map(([f, d]) => `${column(f)}${d < 0 ? " DESC" : ""}`).join(", ");
      const partial = index.sparse ? ` WHERE ${column(fields[0][0])} IS NOT NULL` : "";
      this.schema.push(`CREATE ${index.unique ? "UNIQUE " : ""}INDEX IF NOT EXISTS "${name}" ON ${this.table} (${columns})${partial}`);
    }
  }

  /** SQLite names the index (or the `id` column) whose uniqueness a write would break. */
  private duplicate(err: unknown): never {
    if (primaryCode(err) !== SQLITE_CONSTRAINT) throw err;
    const message = (err as Error).message;
    const index = /index '([^']+)'/.exec(message)?.[1];
    const fields = index ? (this.uniqueFields.get(index) ?? []) : message.endsWith(".id") ? ["id"] : [];
    throw new DuplicateKeyError(this.name, fields);
  }

  private stmt(sql: string): StatementSync {
    return this.store.statement(sql);
  }

  private select(scope: Scope, filter: Filter, options: FindOptions, what = "doc"): { sql: string; params: SQLInputValue[] } {
    const compiled = compile(scope, filter);
    let sql = `SELECT ${what} FROM ${this.table}${whereOf(compiled)}${orderOf(options.sort)}`;
    if (options.limit !== undefined || options.skip) {
      sql += " LIMIT ? OFFSET ?";
      compiled.params.push(options.limit ?? -1, options.skip ?? 0);
    }
    return { sql, params: compiled.params };
  }

  private async read<R>(run: () => R): Promise<R> {
    await this.ready();
    return this.store.read(run);
  }

  async insert(doc: T): Promise<T> {
    await this.ready();
    const text = JSON.stringify(doc);
    await this.store.writer.submit(() => {
      try {
        this.stmt(`INSERT INTO ${this.table} (id, org_id, env, doc) VALUES (?, ?, ?, ?)`).run(doc.id, doc.org_id ?? null, doc.environment ?? null, text);
      } catch (err) {
        this.duplicate(err);
      }
    });
    return doc;
  }

  get(scope: Scope, id: string): Promise<T | null> {
    const { sql, params } = this.select(scope, { id }, {});
    return this.read(() => parse<T>(this.stmt(sql).get(...params) as Row | undefined));
  }

  async findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const { sql, params } = this.select(scope, filter, { sort: options.sort, limit: 1 });
    return this.read(() => parse<T>(this.stmt(sql).get(...params) as Row | undefined));
  }

  find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    const { sql, params } = this.select(scope, filter, options);
    return this.read(() => (this.stmt(sql).all(...params) as Row[]).map((row) => JSON.parse(row.doc) as T));
  }

  count(scope: Scope, filter: Filter, options: Pick<FindOptions, "limit"> = {}): Promise<number> {
    if (options.limit === undefined) {
      const { sql, params } = this.select(scope, filter, {}, "count(*) AS n");
      return this.read(() => (this.stmt(sql).get(...params) as { n: number }).n);
    }
    // Stops at `limit` matches: through a covering index, that many index entries at most.
    const { sql, params } = this.select(scope, filter, { limit: options.limit }, "1");
    return this.read(() => (this.stmt(`SELECT count(*) AS n FROM (${sql})`).get(...params) as { n: number }).n);
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    checkUpdate(update);
    const { sql, params } = this.select(scope, filter, { sort: options.sort, limit: 1 }, "rid, doc");
    await this.ready();
    return this.store.writer.submit(() => {
      const row = this.stmt(sql).get(...params) as Row | undefined;
      if (!row) return null;
      const doc = applyUpdate(JSON.parse(row.doc) as Record<string, unknown>, update);
      try {
        this.stmt(`UPDATE ${this.table} SET doc = ? WHERE rid = ?`).run(JSON.stringify(doc), row.rid);
      } catch (err) {
        this.duplicate(err);
      }
      return doc as unknown as T;
    });
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    checkUpdate(update);
    const { sql, params } = this.select(scope, filter, {}, "rid, doc");
    await this.ready();
    return this.store.writer.submit(() => {
      const rows = this.stmt(sql).all(...params) as Row[];
      if (rows.length === 0) return 0;
      const texts = rows.map((row) => JSON.stringify(applyUpdate(JSON.parse(row.doc) as Record<string, unknown>, update)));
      // All or nothing: a unique index refusing the tenth row undoes the nine before it.
      const db = this.store.db;
      db.exec("SAVEPOINT many");
      try {
        const write = this.stmt(`UPDATE ${this.table} SET doc = ? WHERE rid = ?`);
        rows.forEach((row, i) => write.run(texts[i], row.rid));
        db.exec("RELEASE many");
      } catch (err) {
        if (db.isTransaction) {
          db.exec("ROLLBACK TO many");
          db.exec("RELEASE many");
        }
        this.duplicate(err);
      }
      return rows.length;
    });
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    const { sql, params } = this.select(scope, filter, { limit: 1 }, "rid, doc");
    await this.ready();
    return this.store.writer.submit(() => {
      const row = this.stmt(sql).get(...params) as Row | undefined;
      if (!row) return null;
      this.stmt(`DELETE FROM ${this.table} WHERE rid = ?`).run(row.rid);
      return parse<T>(row);
    });
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    const compiled = compile(scope, filter);
    const sql = `DELETE FROM ${this.table}${whereOf(compiled)}`;
    await this.ready();
    return this.store.writer.submit(() => Number(this.stmt(sql).run(...compiled.params).changes));
  }

  async increment(doc: T, inc: Record<string, number>): Promise<void> {
    checkUpdate({ $inc: inc });
    const created = JSON.stringify(applyUpdate(JSON.parse(JSON.stringify(doc)) as Record<string, unknown>, { $inc: inc }));
    await this.ready();
    // Read and write in one transaction of the writer, which holds the file's write lock: atomic
    // across processes.
    await this.store.writer.submit(() => {
      const row = this.stmt(`SELECT rid, org_id, env, doc FROM ${this.table} WHERE id = ?`).get(doc.id) as (Row & { org_id: string | null; env: string | null }) | undefined;
      try {
        if (!row) {
          this.stmt(`INSERT INTO ${this.table} (id, org_id, env, doc) VALUES (?, ?, ?, ?)`).run(doc.id, doc.org_id ?? null, doc.environment ?? null, created);
          return;
        }
        if (row.org_id !== (doc.org_id ?? null) || row.env !== (doc.environment ?? null)) throw new DuplicateKeyError(this.name, ["id"]);
        const next = applyUpdate(JSON.parse(row.doc) as Record<string, unknown>, { $inc: inc });
        this.stmt(`UPDATE ${this.table} SET doc = ? WHERE rid = ?`).run(JSON.stringify(next), row.rid);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        this.duplicate(err);
      }
    });
  }
}

/**
 * The embedded store: one SQLite database file (`DATA_DIR/store.db`, mode 0600, WAL) that any number
 * of processes on the machine open at once; SQLite's locking makes each compare-and-set atomic across
 * them. A collection is a table of JSON documents (`doc`) beside real columns for `id`, `org_id` and
 * the environment, with an index per `IndexSpec` on the JSON fields it names.
 */
export class SqliteStore implements Store {
  readonly file: string;
  readonly db: DatabaseSync;
  readonly writer: Writer;
  private readonly collections = new Map<string, SqliteCollection<any>>();
  private readonly statements = new Map<string, StatementSync>();
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
    this.writer = new Writer(this.db);
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

  statement(sql: string): StatementSync {
    let stmt = this.statements.get(sql);
    if (!stmt) {
      if (this.statements.size >= MAX_STATEMENTS) this.statements.clear();
      stmt = this.db.prepare(sql);
      this.statements.set(sql, stmt);
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

  /** Answers every write asked for, then closes the file (the last process to close checkpoints it). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.writer.idle();
      this.statements.clear();
      this.db.close();
    })();
    return this.closing;
  }
}
