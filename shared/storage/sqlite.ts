import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { join, resolve } from "node:path";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { Worker } from "node:worker_threads";
import { ApiError, DuplicateKeyError } from "../errors";
import { checkUpdate } from "./scope";
import { columnValue, Layout, whereOf, type Row } from "./sqlite-layout";
import { BUSY_GIVE_UP_MS, isBusy, primaryCode, SQLITE_CONSTRAINT, startCheckpointer, storageUnavailable, Writer } from "./sqlite-writer";
import { applyUpdate } from "./update";
import {
  COLLECTION_NAME,
  type AtomicWrite,
  type Collection,
  type Doc,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type Page,
  type Scope,
  type Store,
  type Update,
} from "./types";

/** The database file under DATA_DIR; SQLite keeps `-wal` and `-shm` beside it. */
export const DATABASE_FILE = "store.db";

/** Statements kept prepared per connection; filter shapes are few, so this is never reached in use. */
const MAX_STATEMENTS = 1000;

class SqliteCollection<T extends Doc> implements Collection<T> {
  private readonly table: string;
  private readonly layout = new Layout();
  private readonly uniqueFields = new Map<string, string[]>();
  private readonly indexes = new Map<string, IndexSpec>();
  /** Whether everything declared is in the file, and the file's schema version the layout matches. */
  private schemaDone = false;
  private applying: Promise<void> | undefined;
  private seenVersion = -1;

  constructor(
    readonly name: string,
    private readonly store: SqliteStore,
    indexes: IndexSpec[],
  ) {
    this.table = `"${name}"`;
    this.declare(indexes);
  }

  declare(indexes: IndexSpec[]): void {
    for (const index of indexes) {
      const key = JSON.stringify([index.fields, index.unique ?? false, index.sparse ?? false]);
      if (this.indexes.has(key)) continue;
      this.indexes.set(key, index);
      for (const field of Object.keys(index.fields)) this.layout.add(field);
      this.schemaDone = false;
    }
  }

  /** An index's name says what it is built on, so one on a field that became a column is a new index. */
  private indexName(index: IndexSpec): string {
    const parts = Object.entries(index.fields).map(
      ([f, d]) => `${f.replace(/\./g, "_")}${this.layout.has(f) ? "_c" : ""}${d < 0 ? "_desc" : ""}`,
    );
    return `${this.name}__${parts.join("__")}${index.unique ? "__u" : ""}${index.sparse ? "__s" : ""}`;
  }

  /**
   * Creates what is declared and not yet in the file, before any operation: the table, a column for
   * each indexed field (moving the values already stored in `doc` into it), and the indexes. Schema
   * changes go through the writer like any write; one that failed (a full disk) is tried again by
   * the next operation.
   */
  private async ready(): Promise<void> {
    while (!this.schemaDone) {
      this.applying ??= this.store.writer
        .submit(() => {
          const db = this.store.db;
          db.exec(
            `CREATE TABLE IF NOT EXISTS ${this.table} (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, org_id TEXT, env TEXT, doc TEXT NOT NULL)`,
          );
          this.refresh(true);
          const existing = new Set((db.prepare(`PRAGMA table_info(${this.table})`).all() as { name: string }[]).map((c) => c.name));
          for (const field of this.layout.fields) {
            if (existing.has(`c_${field}`)) continue;
            db.exec(`ALTER TABLE ${this.table} ADD COLUMN "c_${field}"`);
            db.exec(
              `UPDATE ${this.table} SET "c_${field}" = json_extract(doc, '$.${field}'), doc = json_remove(doc, '$.${field}') WHERE json_type(doc, '$.${field}') IN ('text', 'real', 'integer')`,
            );
          }
          for (const index of this.indexes.values()) {
            const name = this.indexName(index);
            if (index.unique) this.uniqueFields.set(name, Object.keys(index.fields));
            const columns = Object.entries(index.fields)
              .map(([f, d]) => `${this.layout.expr(f)}${d < 0 ? " DESC" : ""}`)
              .join(", ");
            const partial = index.sparse ? ` WHERE ${this.layout.expr(Object.keys(index.fields)[0])} IS NOT NULL` : "";
            db.exec(`CREATE ${index.unique ? "UNIQUE " : ""}INDEX IF NOT EXISTS "${name}" ON ${this.table} (${columns})${partial}`);
          }
          this.dropRedirected();
        })
        .then(
          () => {
            this.schemaDone = true;
            this.applying = undefined;
          },
          (err: unknown) => {
            this.applying = undefined;
            throw err;
          },
        );
      await this.applying;
    }
  }

  /**
   * Drops the indexes of this table that a declared one replaces by the same fields in other
   * directions (SQLite reads an index either way, so they serve the same queries): an index
   * declared ascending where it was descending is not kept twice, each insert paying for both.
   */
  private dropRedirected(): void {
    const declared = new Set([...this.indexes.values()].map((index) => this.indexName(index)));
    const replaced = new Set<string>();
    for (const index of this.indexes.values()) {
      const fields = Object.keys(index.fields);
      // Every other assignment of directions to the same fields (at most a few dozen).
      for (let mask = 0; mask < 2 ** fields.length; mask += 1) {
        const variant = Object.fromEntries(fields.map((f, i) => [f, mask & (1 << i) ? -1 : 1] as const));
        const name = this.indexName({ ...index, fields: variant });
        if (!declared.has(name)) replaced.add(name);
      }
    }
    for (const { name } of this.store.db.prepare(`PRAGMA index_list(${this.table})`).all() as { name: string }[]) {
      if (replaced.has(name)) this.store.db.exec(`DROP INDEX "${name}"`);
    }
  }

  /**
   * Learns the field columns another process (a newer version, more indexes) added to the file:
   * checked on every operation against SQLite's schema version, a counter read from memory.
   */
  private refresh(force = false): void {
    const version = this.store.schemaVersion();
    if (!force && version === this.seenVersion) return;
    this.seenVersion = version;
    for (const { name } of this.store.db.prepare(`PRAGMA table_info(${this.table})`).all() as { name: string }[]) {
      if (name.startsWith("c_")) this.layout.add(name.slice(2));
    }
  }

  /** SQLite names the index (or the `id` column) whose uniqueness a write would break. */
  private duplicate(err: unknown): never {
    if (primaryCode(err) !== SQLITE_CONSTRAINT) throw err;
    const message = (err as Error).message;
    // An index on expressions is named ("index 'x'"); one on columns lists them ("t.org_id, t.c_email").
    const index = /index '([^']+)'/.exec(message)?.[1];
    const columns =
      /failed: (.*)$/
        .exec(message)?.[1]
        .split(", ")
        .map((c) => c.slice(c.indexOf(".") + 1)) ?? [];
    const byColumn = (c: string) => (c === "env" ? "environment" : c.startsWith("c_") ? c.slice(2) : c);
    const fields = index ? (this.uniqueFields.get(index) ?? []) : columns.map(byColumn);
    throw new DuplicateKeyError(this.name, fields);
  }

  private stmt(sql: string): StatementSync {
    return this.store.statement(sql);
  }

  /**
   * A SELECT of `what` (by default the row: `rid`, `doc` and the field columns) for a filter. The
   * limit is written into the statement (a bound LIMIT doubled the cost of a lookup by id here); an
   * offset is bound, and only when there is one.
   */
  private select(
    scope: Scope,
    filter: Filter,
    options: FindOptions,
    what = this.layout.rowColumns(),
  ): { sql: string; params: SQLInputValue[] } {
    const compiled = this.layout.compile(scope, filter);
    let sql = `SELECT ${what} FROM ${this.table}${whereOf(compiled)}${this.layout.orderBy(options.sort)}`;
    if (options.limit !== undefined || options.skip) sql += ` LIMIT ${Math.trunc(options.limit ?? -1)}`;
    if (options.skip) {
      sql += " OFFSET ?";
      compiled.params.push(options.skip);
    }
    return { sql, params: compiled.params };
  }

  /** Documents of a read: rows fetched as arrays (`doc`, then the field columns), which is cheaper. */
  private documents(sql: string, params: SQLInputValue[], one: true): T | null;
  private documents(sql: string, params: SQLInputValue[], one: false): T[];
  private documents(sql: string, params: SQLInputValue[], one: boolean): T | null | T[] {
    const stmt = this.store.statement(sql, true);
    if (one) {
      const row = stmt.get(...params) as unknown as (string | number | null)[] | undefined;
      return row ? this.layout.readValues<T>(row) : null;
    }
    return (stmt.all(...params) as unknown as (string | number | null)[][]).map((row) => this.layout.readValues<T>(row));
  }

  private async read<R>(run: () => R): Promise<R> {
    await this.ready();
    return this.store.read(() => {
      this.refresh();
      return run();
    });
  }

  private async write<R>(run: () => R): Promise<R> {
    await this.ready();
    return this.store.writer.submit(() => {
      this.refresh();
      return run();
    });
  }

  private insertRow(doc: Record<string, unknown>): void {
    const { text, values } = this.layout.split(doc);
    try {
      this.stmt(this.layout.insertSql(this.table)).run(
        doc.id as string,
        (doc.org_id as string | undefined) ?? null,
        (doc.environment as string | undefined) ?? null,
        text,
        ...values,
      );
    } catch (err) {
      this.duplicate(err);
    }
  }

  /** Writes `doc` over `row`: only the parts that changed, so indexes on unchanged columns stay untouched. */
  private writeBack(row: Row, doc: Record<string, unknown>): void {
    const { text, values } = this.layout.split(doc);
    const sets: string[] = [];
    const params: SQLInputValue[] = [];
    if (text !== row.doc) {
      sets.push("doc = ?");
      params.push(text);
    }
    this.layout.fields.forEach((f, i) => {
      if (values[i] === (row[`c_${f}`] ?? null)) return;
      sets.push(`"c_${f}" = ?`);
      params.push(values[i]);
    });
    if (sets.length === 0) return;
    try {
      this.stmt(`UPDATE ${this.table} SET ${sets.join(", ")} WHERE rid = ?`).run(...params, row.rid);
    } catch (err) {
      this.duplicate(err);
    }
  }

  /**
   * The new column values when `update` only changes top-level field columns of `row` (and its
   * `doc` holds none of those fields): then nothing of `doc` need be parsed or written. Else null.
   */
  private columnsOnly(row: Row, update: Update): Map<string, string | number | null> | null {
    if (update.$push && Object.keys(update.$push).length > 0) return null;
    const changes = new Map<string, string | number | null>();
    const plain = (field: string) => this.layout.has(field) && !row.doc.includes(`"${field}":`);
    for (const [field, value] of Object.entries(update.$set ?? {})) {
      if (!plain(field) || !columnValue(value)) return null;
      changes.set(field, value);
    }
    for (const field of Object.keys(update.$unset ?? {})) {
      if (!plain(field)) return null;
      changes.set(field, null);
    }
    for (const [field, by] of Object.entries(update.$inc ?? {})) {
      const current = changes.has(field) ? changes.get(field) : (row[`c_${field}`] ?? 0);
      if (!plain(field) || typeof current !== "number" || !columnValue(current + by)) return null;
      changes.set(field, current + by);
    }
    return changes;
  }

  /** Applies `update` to the stored `row`; answers the document as updated. */
  private updateRow(row: Row, update: Update, wanted: boolean): T | null {
    const changes = this.columnsOnly(row, update);
    if (!changes) {
      const doc = applyUpdate(this.layout.read(row), update);
      this.writeBack(row, doc);
      return doc as unknown as T;
    }
    if (changes.size > 0) {
      const fields = [...changes.keys()];
      try {
        this.stmt(`UPDATE ${this.table} SET ${fields.map((f) => `"c_${f}" = ?`).join(", ")} WHERE rid = ?`).run(
          ...changes.values(),
          row.rid,
        );
      } catch (err) {
        this.duplicate(err);
      }
      for (const [f, v] of changes) row[`c_${f}`] = v;
    }
    return wanted ? this.layout.read<T>(row) : null;
  }

  async insert(doc: T): Promise<T> {
    await this.write(() => this.insertRow(doc as unknown as Record<string, unknown>));
    return doc;
  }

  get(scope: Scope, id: string): Promise<T | null> {
    return this.findOne(scope, { id });
  }

  findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    return this.read(() => {
      const { sql, params } = this.select(scope, filter, { sort: options.sort, limit: 1 }, this.layout.valueColumns());
      return this.documents(sql, params, true);
    });
  }

  find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    return this.read(() => {
      const { sql, params } = this.select(scope, filter, options, this.layout.valueColumns());
      return this.documents(sql, params, false);
    });
  }

  pluck<K extends keyof T & string>(scope: Scope, filter: Filter, fields: readonly K[], options: FindOptions = {}): Promise<Pick<T, K>[]> {
    return this.read(() => {
      const { sql, params } = this.select(scope, filter, options, fields.map((f) => this.layout.expr(f)).join(", "));
      const rows = this.store.statement(sql, true).all(...params) as unknown as (string | number | null)[][];
      return rows.map((row) => {
        const picked: Record<string, string | number> = {};
        fields.forEach((field, i) => {
          if (row[i] !== null) picked[field] = row[i];
        });
        return picked as Pick<T, K>;
      });
    });
  }

  count(scope: Scope, filter: Filter, options: Pick<FindOptions, "limit"> = {}): Promise<number> {
    return this.read(() => {
      if (options.limit === undefined) {
        const { sql, params } = this.select(scope, filter, {}, "count(*) AS n");
        return (this.stmt(sql).get(...params) as { n: number }).n;
      }
      // Stops at `limit` matches: through a covering index, that many index entries at most.
      const { sql, params } = this.select(scope, filter, { limit: options.limit }, "1");
      return (this.stmt(`SELECT count(*) AS n FROM (${sql})`).get(...params) as { n: number }).n;
    });
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, changes: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const update = checkUpdate(changes);
    return this.write(() => {
      const { sql, params } = this.select(scope, filter, { sort: options.sort, limit: 1 });
      const row = this.stmt(sql).get(...params) as Row | undefined;
      return row ? this.updateRow(row, update, true) : null;
    });
  }

  /**
   * The new column values when `update` only sets or unsets top-level field columns to column
   * values (what unsetting an event's marker does), so rows need no reading: see `updateMany`.
   */
  private columnsUpdate(update: Update): Map<string, string | number | null> | null {
    const changes = new Map<string, string | number | null>();
    for (const [op, fields] of Object.entries(update)) {
      if (op !== "$set" && op !== "$unset") return null;
      for (const [field, value] of Object.entries(fields as Record<string, unknown>)) {
        if (!this.layout.has(field) || changes.has(field)) return null;
        if (op === "$unset") changes.set(field, null);
        else if (columnValue(value)) changes.set(field, value);
        else return null;
      }
    }
    return changes.size > 0 ? changes : null;
  }

  async updateMany(scope: Scope, filter: Filter, changes: Update): Promise<number> {
    const update = checkUpdate(changes);
    return this.write(() => {
      const columns = this.columnsUpdate(update);
      const compiled = this.layout.compile(scope, filter);
      // Rows whose `doc` holds one of the fields (a value that was no column value) take the general
      // path below; every other row is changed by one UPDATE, none of it read or parsed here.
      const marks = columns ? [...columns.keys()].map((f) => `"${f}":`) : [];
      const holds = marks.map(() => "instr(doc, ?) > 0").join(" OR ");
      const where = whereOf(compiled);
      const and = where ? `${where} AND ` : " WHERE ";
      const db = this.store.db;
      // All or nothing: a unique index refusing the tenth row undoes the nine before it.
      db.exec("SAVEPOINT many");
      try {
        let changed = 0;
        if (columns) {
          const sets = [...columns.keys()].map((f) => `"c_${f}" = ?`).join(", ");
          try {
            changed = Number(
              this.stmt(`UPDATE ${this.table} SET ${sets}${and}NOT (${holds})`).run(...columns.values(), ...compiled.params, ...marks)
                .changes,
            );
          } catch (err) {
            this.duplicate(err);
          }
        }
        const rows = (
          columns
            ? this.stmt(`SELECT ${this.layout.rowColumns()} FROM ${this.table}${and}(${holds})`).all(...compiled.params, ...marks)
            : this.stmt(`SELECT ${this.layout.rowColumns()} FROM ${this.table}${where}`).all(...compiled.params)
        ) as Row[];
        for (const row of rows) this.updateRow(row, update, false);
        db.exec("RELEASE many");
        return changed + rows.length;
      } catch (err) {
        if (db.isTransaction) {
          db.exec("ROLLBACK TO many");
          db.exec("RELEASE many");
        }
        throw err;
      }
    });
  }

  delete(scope: Scope, filter: Filter): Promise<T | null> {
    return this.write(() => {
      const { sql, params } = this.select(scope, filter, { limit: 1 });
      const row = this.stmt(sql).get(...params) as Row | undefined;
      if (!row) return null;
      this.stmt(`DELETE FROM ${this.table} WHERE rid = ?`).run(row.rid);
      return this.layout.read<T>(row);
    });
  }

  deleteMany(scope: Scope, filter: Filter): Promise<number> {
    return this.write(() => {
      const compiled = this.layout.compile(scope, filter);
      return Number(this.stmt(`DELETE FROM ${this.table}${whereOf(compiled)}`).run(...compiled.params).changes);
    });
  }

  /** For `SqliteStore.atomically`: the schema in place, before a job that runs the parts below. */
  prepare(): Promise<void> {
    return this.ready();
  }

  /** For `SqliteStore.atomically`, inside a writer job. */
  insertNow(doc: Doc): void {
    this.refresh();
    this.insertRow(doc as unknown as Record<string, unknown>);
  }

  /** For `SqliteStore.atomically`, inside a writer job: the document as updated, or null. */
  updateNow(scope: Scope, filter: Filter, update: Update): T | null {
    this.refresh();
    const { sql, params } = this.select(scope, filter, { limit: 1 });
    const row = this.stmt(sql).get(...params) as Row | undefined;
    return row ? this.updateRow(row, update, true) : null;
  }

  async increment(doc: T, inc: Record<string, number>): Promise<void> {
    checkUpdate({ $inc: inc });
    // Read and write in one transaction of the writer, which holds the file's write lock: atomic
    // across processes.
    await this.write(() => {
      const row = this.stmt(`SELECT org_id, env, ${this.layout.rowColumns()} FROM ${this.table} WHERE id = ?`).get(doc.id) as
        (Row & { org_id: string | null; env: string | null }) | undefined;
      if (!row) return this.insertRow(applyUpdate(JSON.parse(JSON.stringify(doc)) as Record<string, unknown>, { $inc: inc }));
      if (row.org_id !== (doc.org_id ?? null) || row.env !== (doc.environment ?? null)) throw new DuplicateKeyError(this.name, ["id"]);
      this.updateRow(row, { $inc: inc }, false);
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

  /**
   * A small real write, through the writer like every other: one row of `_probe` (no collection's
   * name can start with `_`), upserted. It fails as any write of its batch would (`storage_unavailable`
   * on a full disk), so a readiness check that uses it tells whether writes are being stored.
   */
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
