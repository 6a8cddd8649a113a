import { ApiError } from "../errors";
import type { FindOptions, Update } from "./types";

type Raw = Record<string, unknown>;

/**
 * How documents are stored in MongoDB. A document's `id` is its `_id` (MongoDB's own unique key,
 * so no second unique index and no ObjectId beside it); every other key is stored with `%`, `.`,
 * `$` and NUL percent-encoded (and `__proto__` as `%5F_proto__`), because documents hold free-form
 * JSON (event `data`, run `input`) whose keys can be anything, while MongoDB gives `.` and a leading
 * `$` meaning and BSON refuses NUL in a key. The services' own field names hold none of these, so
 * filters, sorts and update paths are unchanged. Values are stored as JSON would carry them: a
 * number JSON cannot write (Infinity, NaN) as null, -0 as 0, undefined left out (as the embedded
 * store, which stores JSON text, does).
 */
// eslint-disable-next-line no-control-regex -- NUL is what BSON refuses in a key
const SPECIAL_KEY = /[%.$\u0000]/g;
export const encodeKey = (key: string): string =>
  key === "__proto__" ? "%5F_proto__" : key.replace(SPECIAL_KEY, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0").toUpperCase()}`);
export const decodeKey = (key: string): string =>
  key.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
const needsEncoding = (key: string) => key === "__proto__" || /[%.$]/.test(key) || key.includes("\u0000");

const define = (target: Raw, key: string, value: unknown): void => {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
};

const isPlainObject = (value: unknown): value is Raw =>
  value !== null && typeof value === "object" && !Array.isArray(value) && (value as { _bsontype?: unknown })._bsontype === undefined;

/** A value as stored: keys encoded, numbers as JSON carries them, undefined dropped (null in an array, as in JSON). */
export function toStoredValue(value: unknown): unknown {
  if (typeof value === "number") return Number.isFinite(value) ? value + 0 : null;
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : toStoredValue(v)));
  if (!isPlainObject(value)) return value;
  const out: Raw = {};
  for (const key of Object.keys(value)) {
    const v = value[key];
    if (v !== undefined) define(out, needsEncoding(key) ? encodeKey(key) : key, toStoredValue(v));
  }
  return out;
}

/** A stored value as the services see it: keys decoded. */
export function fromStoredValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromStoredValue);
  if (!isPlainObject(value)) return value;
  const out: Raw = {};
  for (const key of Object.keys(value)) define(out, key.includes("%") ? decodeKey(key) : key, fromStoredValue(value[key]));
  return out;
}

/** A document as stored: `id` as `_id`, in its place. */
export function toStored(doc: object): Raw {
  if (Object.prototype.hasOwnProperty.call(doc, "_id")) throw new ApiError("internal_error", "storage: a document may not carry '_id'");
  const out: Raw = {};
  for (const [key, v] of Object.entries(toStoredValue(doc) as Raw)) define(out, key === "id" ? "_id" : key, v);
  return out;
}

/** A stored document (or the fields of one) as the services see it: `_id` as `id`, in its place. */
export function fromStored<T>(raw: Raw | null): T | null {
  if (raw === null) return null;
  const out: Raw = {};
  for (const [key, v] of Object.entries(fromStoredValue(raw) as Raw)) define(out, key === "_id" ? "id" : key, v);
  return out as T;
}

/** A field path as stored: `id` is `_id`; every other path is the services' own and stored as written. */
export const storedPath = (path: string): string => (path === "id" ? "_id" : path);

/** A filter (checked and scoped by scope.ts) as MongoDB runs it. */
export const storedFilter = (filter: Raw): Raw =>
  Object.fromEntries(Object.entries(filter).map(([path, cond]) => [storedPath(path), cond]));

export const storedSort = (sort: FindOptions["sort"]): Record<string, 1 | -1> | undefined =>
  sort && Object.fromEntries(Object.entries(sort).map(([path, dir]) => [storedPath(path), dir]));

/** An update (checked by scope.ts) as MongoDB applies it: its values stored as documents' values are. */
export function storedUpdate(update: Update): Raw {
  const out: Raw = {};
  if (update.$set) out.$set = Object.fromEntries(Object.entries(update.$set).map(([path, v]) => [path, toStoredValue(v)]));
  if (update.$unset) out.$unset = Object.fromEntries(Object.keys(update.$unset).map((path) => [path, ""]));
  if (update.$inc) out.$inc = { ...update.$inc };
  if (update.$push) out.$push = Object.fromEntries(Object.entries(update.$push).map(([path, v]) => [path, toStoredValue(v)]));
  return out;
}

/**
 * The fields of a `pluck`, from a stored document: each by its dotted path, as a flat key (as the
 * embedded store answers), left out where the document holds nothing or null there.
 */
export function plucked(raw: Raw, fields: readonly string[]): Raw {
  const out: Raw = {};
  for (const field of fields) {
    let at: unknown = raw;
    for (const part of storedPath(field).split(".")) at = isPlainObject(at) ? at[part] : undefined;
    if (at !== undefined && at !== null) define(out, field, fromStoredValue(at));
  }
  return out;
}

/** What a limit means in both engines: 0 is no document at all (MongoDB reads 0 as "no limit"), a negative one no limit. */
export const limitOf = (limit: number | undefined): number | "none" | undefined =>
  limit === undefined || limit < 0 ? undefined : Math.trunc(limit) === 0 ? "none" : Math.trunc(limit);
