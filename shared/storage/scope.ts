import { ApiError } from "../errors";
import type { Filter, FilterValue, Scope, Update } from "./types";

/**
 * What both adapters check before they run a filter or an update, so that a call one engine would
 * run and the other refuse (or run differently) is refused by both, with the same message. Filters
 * and update paths are written by the services, never taken from a request: a refusal here is a
 * defect of the caller, answered 500.
 */
const refuse = (message: string): ApiError => new ApiError("internal_error", `storage: ${message}`);

const IMMUTABLE = new Set(["id", "org_id", "environment", "_id"]);

/** Field paths of filters and sorts: dotted identifiers (never `$where`, never a key from a request). */
export const FIELD_PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
/** A segment of an update path: an identifier, or an array index. */
const UPDATE_SEGMENT = /^[A-Za-z_][A-Za-z0-9_]*$|^\d+$/;
const UPDATE_OPERATORS = new Set(["$set", "$unset", "$inc", "$push"]);

const isScalar = (v: unknown): boolean => typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));
/** What equality, `$ne` and `$in` compare with: a scalar or null (which also matches an absent field). */
const isComparable = (v: unknown): boolean => v === null || isScalar(v);
/** What a range compares with: both engines order strings and numbers, each within its own type. */
const isOrdered = (v: unknown): boolean => typeof v === "string" || (typeof v === "number" && Number.isFinite(v));

/**
 * Paths already found good, by kind: services use a few dozen constant paths, so each is tested
 * once (a path is never taken from a request; the bound keeps a defect from growing it forever).
 */
const goodFilterPaths = new Set<string>();
const goodUpdatePaths = new Set<string>();
const GOOD_PATHS_MAX = 4096;

function remembered(paths: Set<string>, path: string): void {
  if (paths.size >= GOOD_PATHS_MAX) paths.clear();
  paths.add(path);
}

function checkFilterPath(path: string): void {
  if (goodFilterPaths.has(path)) return;
  if (!FIELD_PATH.test(path)) throw refuse(`'${path}' is not a field path`);
  remembered(goodFilterPaths, path);
}

function checkCondition(path: string, cond: FilterValue): void {
  checkFilterPath(path);
  if (cond === undefined) throw refuse(`the filter on '${path}' is undefined (it would match every document on MongoDB)`);
  if (cond === null || typeof cond !== "object") {
    if (!isComparable(cond)) throw refuse(`cannot compare '${path}' with ${String(cond)}`);
    return;
  }
  if (Array.isArray(cond)) throw refuse(`cannot compare '${path}' with an array`);
  for (const [op, value] of Object.entries(cond)) {
    const bad = (what: string) =>
      refuse(`'${op}' on '${path}' takes ${what}; received ${value === undefined ? "undefined" : JSON.stringify(value)}`);
    switch (op) {
      case "$in":
      case "$nin":
        if (!Array.isArray(value) || !value.every(isComparable)) throw bad("an array of strings, finite numbers, booleans or null");
        break;
      case "$ne":
        if (!isComparable(value)) throw bad("a string, a finite number, a boolean or null");
        break;
      case "$lt":
      case "$lte":
      case "$gt":
      case "$gte":
        if (!isOrdered(value)) throw bad("a string or a finite number");
        break;
      case "$exists":
        if (typeof value !== "boolean") throw bad("a boolean");
        break;
      default:
        throw refuse(`unsupported operator '${op}'`);
    }
  }
}

/** Refuses a filter that either engine would not evaluate as `Filter` describes (see FIELD_PATH, isComparable). */
export function checkFilter(filter: Filter): Filter {
  for (const [path, cond] of Object.entries(filter)) checkCondition(path, cond);
  return filter;
}

/** The filter an adapter runs: the caller's filter, checked, narrowed to the scope's tenant. */
export function scoped(scope: Scope, filter: Filter): Record<string, unknown> {
  checkFilter(filter);
  if ("all_tenants" in scope) return { ...filter };
  const out: Record<string, unknown> = { ...filter, org_id: scope.org_id };
  if (scope.environment !== undefined) out.environment = scope.environment;
  return out;
}

function checkPath(path: string): void {
  if (goodUpdatePaths.has(path)) return;
  const parts = path.split(".");
  if (!parts.every((p) => UPDATE_SEGMENT.test(p) && p !== "__proto__")) throw refuse(`'${path}' is not a field path`);
  if (IMMUTABLE.has(parts[0])) throw refuse(`an update may not change '${parts[0]}'`);
  remembered(goodUpdatePaths, path);
}

/**
 * The update both adapters apply, or a refusal. Refused: an operator other than `$set`, `$unset`,
 * `$inc` and `$push`; a path that is no dotted identifier, or that names `id`, `org_id` or
 * `environment` (a document never moves to another tenant); two paths of which one is, or lies
 * inside, the other (MongoDB refuses those, the embedded store would apply them in turn); `$inc` by
 * anything but a finite number; `$push` of undefined. A `$set` to undefined becomes an `$unset`:
 * what JSON makes of it in the embedded store, where MongoDB would otherwise leave the field as it
 * was (undefined is dropped on the way).
 */
export function checkUpdate(update: Update): Update {
  const out: Update = {};
  const paths: string[] = [];
  for (const [op, fields] of Object.entries(update) as [string, Record<string, unknown> | undefined][]) {
    if (!UPDATE_OPERATORS.has(op)) throw refuse(`unsupported update operator '${op}'`);
    for (const [path, value] of Object.entries(fields ?? {})) {
      checkPath(path);
      paths.push(path);
      if (op === "$inc" && (typeof value !== "number" || !Number.isFinite(value)))
        throw refuse(`cannot $inc '${path}' by ${value === undefined ? "undefined" : JSON.stringify(value)}`);
      if (op === "$push" && value === undefined) throw refuse(`cannot $push undefined to '${path}'`);
      const target = op === "$set" && value === undefined ? "$unset" : (op as keyof Update);
      (out[target] ??= {} as never)[path] = (target === "$unset" ? true : value) as never;
    }
  }
  if (paths.length < 2) return out;
  const sorted = paths.sort();
  for (let i = 1; i < sorted.length; i += 1) {
    if (sorted[i] === sorted[i - 1] || sorted[i].startsWith(`${sorted[i - 1]}.`))
      throw refuse(`the update paths '${sorted[i - 1]}' and '${sorted[i]}' overlap`);
  }
  return out;
}
