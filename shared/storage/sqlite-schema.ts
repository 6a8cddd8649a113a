import type { DatabaseSync, StatementSync } from "node:sqlite";
import { DuplicateKeyError } from "../errors";
import { Layout } from "./sqlite-layout";
import { primaryCode, SQLITE_CONSTRAINT, type Writer } from "./sqlite-writer";
import type { IndexSpec } from "./types";

/** What a collection asks of the embedded store (sqlite.ts). */
export interface SqliteHost {
  readonly db: DatabaseSync;
  readonly writer: Writer;
  /** SQLite's schema cookie (see SqliteStore.schemaVersion). */
  schemaVersion(): number;
  /** The prepared statement of `sql`, made once; `arrays`: its rows come as arrays. */
  statement(sql: string, arrays?: boolean): StatementSync;
  /** A read: run now; a file locked by another process is tried again shortly. */
  read<R>(run: () => R): Promise<R>;
}

/**
 * A collection's table as declared: its columns and indexes, created in the file before the
 * collection's first operation, and learnt again when another process changes the file's schema.
 */
export class TableSchema {
  readonly table: string;
  readonly layout = new Layout();
  private readonly uniqueFields = new Map<string, string[]>();
  private readonly indexes = new Map<string, IndexSpec>();
  /** Whether everything declared is in the file, and the file's schema version the layout matches. */
  private schemaDone = false;
  private applying: Promise<void> | undefined;
  private seenVersion = -1;

  constructor(
    readonly name: string,
    private readonly store: SqliteHost,
    indexes: IndexSpec[],
  ) {
    this.table = `"${name}"`;
    this.declare(indexes);
  }

  declare(indexes: IndexSpec[]): void {
    for (const index of indexes) {
      const key = JSON.stringify([index.fields, index.unique ?? false, index.sparse ?? false, index.present ?? null]);
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
    const present = index.present === undefined ? "" : `__p_${index.present}`;
    return `${this.name}__${parts.join("__")}${index.unique ? "__u" : ""}${index.sparse ? "__s" : ""}${present}`;
  }

  /**
   * Creates what is declared and not yet in the file, before any operation: the table, a column for
   * each indexed field (moving the values already stored in `doc` into it), and the indexes. Schema
   * changes go through the writer like any write; one that failed (a full disk) is tried again by
   * the next operation.
   */
  async ready(): Promise<void> {
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
            const only = index.present ?? (index.sparse ? Object.keys(index.fields)[0] : undefined);
            const partial = only === undefined ? "" : ` WHERE ${this.layout.expr(only)} IS NOT NULL`;
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
   * directions (SQLite reads an index either way, so they serve the same queries), or by the same
   * fields and directions over all documents where it now holds those with a field present: an
   * index is not kept twice, each insert paying for both.
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
      if (index.present !== undefined) {
        const whole = this.indexName({ ...index, present: undefined });
        if (!declared.has(whole)) replaced.add(whole);
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
  refresh(force = false): void {
    const version = this.store.schemaVersion();
    if (!force && version === this.seenVersion) return;
    this.seenVersion = version;
    for (const { name } of this.store.db.prepare(`PRAGMA table_info(${this.table})`).all() as { name: string }[]) {
      if (name.startsWith("c_")) this.layout.add(name.slice(2));
    }
  }

  /** SQLite names the index (or the `id` column) whose uniqueness a write would break. */
  duplicate(err: unknown): never {
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
}
