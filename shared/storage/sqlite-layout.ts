import type { SQLInputValue } from "node:sqlite";
import { ApiError } from "../errors";
import { parseJson } from "../api/json-parse";
import { scoped } from "./scope";
import type { Filter, FindOptions, Scope } from "./types";

/** Field names the services filter and sort on: dotted identifiers, never data from a request. */
const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const TOP_LEVEL = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The three fields every document has, kept as real columns (and in `doc`). */
const BUILT_IN: Record<string, string> = { id: "id", org_id: "org_id", environment: "env" };

/** A value a field column holds: a string or a number SQLite gives back exactly. Anything else stays in `doc`. */
export const columnValue = (v: unknown): v is string | number =>
  typeof v === "string" || (typeof v === "number" && Number.isFinite(v) && (Number.isSafeInteger(v) || !Number.isInteger(v)));

export interface Sql {
  where: string[];
  params: SQLInputValue[];
}

function scalar(path: string, value: unknown): SQLInputValue {
  if (typeof value === "string" || (typeof value === "number" && Number.isFinite(value))) return value;
  throw new ApiError("internal_error", `storage: cannot compare '${path}' with ${JSON.stringify(value)}`);
}

const RANGE = { $lt: "<", $lte: "<=", $gt: ">", $gte: ">=" } as const;

/** A stored row: the document's JSON text, without its field columns, and those columns. */
export type Row = { rid: number; doc: string } & Record<string, string | number | null>;

/**
 * Where each field of a collection's documents lives. Every top-level field an index names is a
 * real column (`c_<field>`) while it holds a string or a number, and is left out of `doc`; other
 * values of it (a boolean, null, an object) stay in `doc`. So an index is on a column, and an update
 * that only changes such fields (a marker unset, a claim's due time) writes those columns alone:
 * no JSON re-written, and only the indexes on them touched. Dotted paths are JSON expressions on
 * `doc`. Documents read back are `doc` with the columns' values added (after the other fields).
 */
export class Layout {
  /** Field columns, in declaration order. */
  readonly fields: string[] = [];
  private readonly set = new Set<string>();

  has(field: string): boolean {
    return this.set.has(field);
  }

  add(field: string): boolean {
    if (!TOP_LEVEL.test(field) || field in BUILT_IN || this.set.has(field)) return false;
    this.set.add(field);
    this.fields.push(field);
    return true;
  }

  /** The SQL of a field: its column, or the JSON expression for a dotted path. */
  expr(path: string): string {
    if (path in BUILT_IN) return BUILT_IN[path];
    if (this.set.has(path)) return `"c_${path}"`;
    if (!PATH.test(path)) throw new ApiError("internal_error", `storage: '${path}' is not a field path`);
    return `json_extract(doc, '$.${path}')`;
  }

  private jsonType(path: string): string {
    return `json_type(doc, '$.${path}')`;
  }

  /** `path = value` with JSON's types kept apart (a boolean is not the number 1; null is also absent). */
  private equals(sql: Sql, path: string, value: unknown): string {
    if (path in BUILT_IN) {
      if (value === null) return `${BUILT_IN[path]} IS NULL`;
      if (typeof value === "boolean") return "0";
    }
    if (value === null)
      return this.set.has(path) ? `(${this.expr(path)} IS NULL AND json_extract(doc, '$.${path}') IS NULL)` : `${this.expr(path)} IS NULL`;
    if (typeof value === "boolean") return `${this.jsonType(path)} = '${value}'`;
    sql.params.push(scalar(path, value));
    return `${this.expr(path)} = ?`;
  }

  private within(sql: Sql, path: string, values: unknown[]): string {
    const plain = values.filter((v) => v !== null && typeof v !== "boolean").map((v) => scalar(path, v));
    const parts = values.filter((v) => v === null || typeof v === "boolean").map((v) => this.equals(sql, path, v));
    if (plain.length > 0) {
      sql.params.push(JSON.stringify(plain));
      parts.push(`${this.expr(path)} IN (SELECT value FROM json_each(?))`);
    }
    return parts.length === 0 ? "0" : `(${parts.join(" OR ")})`;
  }

  /** A range only compares values of the same JSON type, as MongoDB does. */
  private range(sql: Sql, path: string, op: keyof typeof RANGE, value: unknown): string {
    sql.params.push(scalar(path, value));
    const types = typeof value === "number" ? "('integer', 'real')" : "('text')";
    return `(${this.expr(path)} ${RANGE[op]} ? AND typeof(${this.expr(path)}) IN ${types})`;
  }

  private exists(path: string): string {
    if (path in BUILT_IN) return `${BUILT_IN[path]} IS NOT NULL`;
    if (this.set.has(path)) return `(${this.expr(path)} IS NOT NULL OR ${this.jsonType(path)} IS NOT NULL)`;
    return `${this.jsonType(path)} IS NOT NULL`;
  }

  /** Compiles a filter (see `Filter`) into SQL conditions and their parameters. */
  compile(scope: Scope, filter: Filter): Sql {
    const sql: Sql = { where: [], params: [] };
    for (const [path, cond] of Object.entries(scoped(scope, filter))) {
      if (cond === null || typeof cond !== "object" || Array.isArray(cond)) {
        sql.where.push(this.equals(sql, path, cond));
        continue;
      }
      for (const [op, value] of Object.entries(cond)) {
        switch (op) {
          case "$in":
            sql.where.push(this.within(sql, path, value as unknown[]));
            break;
          case "$nin":
            sql.where.push(`NOT COALESCE(${this.within(sql, path, value as unknown[])}, 0)`);
            break;
          case "$ne":
            sql.where.push(`NOT COALESCE(${this.equals(sql, path, value)}, 0)`);
            break;
          case "$lt":
          case "$lte":
          case "$gt":
          case "$gte":
            sql.where.push(this.range(sql, path, op, value));
            break;
          case "$exists":
            sql.where.push(value ? this.exists(path) : `NOT ${this.exists(path)}`);
            break;
          default:
            throw new ApiError("internal_error", `storage: unsupported operator '${op}'`);
        }
      }
    }
    return sql;
  }

  orderBy(sort: FindOptions["sort"]): string {
    if (!sort || Object.keys(sort).length === 0) return "";
    return ` ORDER BY ${Object.entries(sort)
      .map(([path, dir]) => `${this.expr(path)} ${dir < 0 ? "DESC" : "ASC"}`)
      .join(", ")}`;
  }

  /** A document as stored: the JSON text of what is not in a field column, and the columns' values. */
  split(doc: Record<string, unknown>): { text: string; values: (string | number | null)[] } {
    if (this.fields.length === 0) return { text: JSON.stringify(doc), values: [] };
    const rest: Record<string, unknown> = {};
    for (const key of Object.keys(doc)) {
      const v = doc[key];
      if (this.set.has(key) && columnValue(v)) continue;
      if (key === "__proto__") Object.defineProperty(rest, key, { value: v, writable: true, enumerable: true, configurable: true });
      else rest[key] = v;
    }
    return { text: JSON.stringify(rest), values: this.fields.map((f) => (columnValue(doc[f]) ? (doc[f] as string | number) : null)) };
  }

  /** The INSERT of a whole row, for the layout as it is now. */
  insertSql(table: string): string {
    if (this.insertFor !== this.fields.length) {
      const columns = this.fields.map((f) => `, "c_${f}"`).join("");
      this.insertText = `INSERT INTO ${table} (id, org_id, env, doc${columns}) VALUES (?, ?, ?, ?${this.fields.map(() => ", ?").join("")})`;
      this.insertFor = this.fields.length;
    }
    return this.insertText;
  }
  private insertFor = -1;
  private insertText = "";

  /** A row: `rid`, `doc` and every field column (read as an object: see `Row`). */
  rowColumns(): string {
    return ["rid", "doc", ...this.fields.map((f) => `"c_${f}"`)].join(", ");
  }

  /** What a read fetches, as an array: `doc`, then every field column in `fields` order. */
  valueColumns(): string {
    return ["doc", ...this.fields.map((f) => `"c_${f}"`)].join(", ");
  }

  /** The document of a `valueColumns()` row. */
  readValues<T>(row: (string | number | null)[]): T {
    const doc = parseJson(row[0] as string) as Record<string, unknown>;
    for (let i = 0; i < this.fields.length; i += 1) {
      const v = row[i + 1];
      if (v !== null && v !== undefined) doc[this.fields[i]] = v;
    }
    return doc as T;
  }

  /** The document a row holds: `doc` and every field column with a value. */
  read<T>(row: Row): T {
    const doc = parseJson(row.doc) as Record<string, unknown>;
    for (const key of Object.keys(row)) {
      if (key.startsWith("c_") && row[key] !== null) doc[key.slice(2)] = row[key];
    }
    return doc as T;
  }
}

export const whereOf = (sql: Sql) => (sql.where.length > 0 ? ` WHERE ${sql.where.join(" AND ")}` : "");
