import type { SQLInputValue, StatementSync } from "node:sqlite";
import { DuplicateKeyError } from "../errors";
import { parseJson } from "../api/json-parse";
import { checkUpdate } from "./scope";
import { columnValue, whereOf, type Layout, type Row } from "./sqlite-layout";
import { TableSchema, type SqliteHost } from "./sqlite-schema";
import { applyUpdate } from "./update";
import type { Collection, Doc, Filter, FindOptions, IndexSpec, Page, Scope, Update } from "./types";

/** A collection of the embedded store: a table of JSON documents (see Layout), its schema in TableSchema. */
export class SqliteCollection<T extends Doc> implements Collection<T> {
  private readonly schema: TableSchema;
  private readonly table: string;
  private readonly layout: Layout;

  constructor(
    readonly name: string,
    private readonly store: SqliteHost,
    indexes: IndexSpec[],
  ) {
    this.schema = new TableSchema(name, store, indexes);
    this.table = this.schema.table;
    this.layout = this.schema.layout;
  }

  declare(indexes: IndexSpec[]): void {
    this.schema.declare(indexes);
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
    await this.schema.ready();
    return this.store.read(() => {
      this.schema.refresh();
      return run();
    });
  }

  private async write<R>(run: () => R): Promise<R> {
    await this.schema.ready();
    return this.store.writer.submit(() => {
      this.schema.refresh();
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
      this.schema.duplicate(err);
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
      this.schema.duplicate(err);
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
        this.schema.duplicate(err);
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
            this.schema.duplicate(err);
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
    return this.schema.ready();
  }

  /** For `SqliteStore.atomically`, inside a writer job. */
  insertNow(doc: Doc): void {
    this.schema.refresh();
    this.insertRow(doc as unknown as Record<string, unknown>);
  }

  /** For `SqliteStore.atomically`, inside a writer job: the document as updated, or null. */
  updateNow(scope: Scope, filter: Filter, update: Update): T | null {
    this.schema.refresh();
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
      if (!row) return this.insertRow(applyUpdate(parseJson(JSON.stringify(doc)) as Record<string, unknown>, { $inc: inc }));
      if (row.org_id !== (doc.org_id ?? null) || row.env !== (doc.environment ?? null)) throw new DuplicateKeyError(this.name, ["id"]);
      this.updateRow(row, { $inc: inc }, false);
    });
  }
}
