import { ApiError } from "../errors";
import type { Update } from "./types";

type Obj = Record<string, unknown>;

/** Update paths are written by the services (`attempts`, `nested.a`), never taken from a request. */
const SEGMENT = /^[A-Za-z_][A-Za-z0-9_]*$|^\d+$/;

function segments(path: string): string[] {
  const parts = path.split(".");
  if (!parts.every((p) => SEGMENT.test(p) && p !== "__proto__"))
    throw new ApiError("internal_error", `storage: '${path}' is not a field path`);
  return parts;
}

const isObject = (v: unknown): v is Obj => v !== null && typeof v === "object";

/**
 * The object holding the last segment of `path`, made on the way when `create`; else undefined. A
 * value on the way that cannot hold the next segment (a scalar, null, an array for a name) refuses
 * a change, as MongoDB does; an `$unset` through it changes nothing, as there.
 */
function parentOf(doc: Obj, parts: string[], create: boolean): Obj | undefined {
  let at: Obj = doc;
  for (const [i, part] of parts.slice(0, -1).entries()) {
    let next = Object.prototype.hasOwnProperty.call(at, part) ? at[part] : undefined;
    const holds = isObject(next) && (!Array.isArray(next) || /^\d+$/.test(parts[i + 1]));
    if (next !== undefined && !holds) {
      if (!create) return undefined;
      const holding = next === null ? "null" : Array.isArray(next) ? "an array" : `a ${typeof next}`;
      throw new ApiError(
        "internal_error",
        `storage: cannot write '${parts.join(".")}' through '${parts.slice(0, i + 1).join(".")}', which holds ${holding}`,
      );
    }
    if (next === undefined) {
      if (!create) return undefined;
      next = {};
      // Defined, not assigned: an own data property whatever the name.
      Object.defineProperty(at, part, { value: next, writable: true, enumerable: true, configurable: true });
    }
    at = next as Obj;
  }
  return at;
}

function put(target: Obj, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/**
 * Applies `$set`, `$unset`, `$inc` and `$push` (dotted paths allowed) to a document in place and
 * returns it: the semantics both engines share.
 */
export function applyUpdate(doc: Obj, update: Update): Obj {
  for (const [path, value] of Object.entries(update.$set ?? {})) {
    const parts = segments(path);
    put(parentOf(doc, parts, true)!, parts[parts.length - 1], value);
  }
  for (const path of Object.keys(update.$unset ?? {})) {
    const parts = segments(path);
    const parent = parentOf(doc, parts, false);
    if (parent) delete parent[parts[parts.length - 1]];
  }
  for (const [path, by] of Object.entries(update.$inc ?? {})) {
    const parts = segments(path);
    const parent = parentOf(doc, parts, true)!;
    const key = parts[parts.length - 1];
    const current = parent[key] ?? 0;
    if (typeof current !== "number") throw new ApiError("internal_error", `storage: cannot $inc '${path}', which is not a number`);
    put(parent, key, current + by);
  }
  for (const [path, value] of Object.entries(update.$push ?? {})) {
    const parts = segments(path);
    const parent = parentOf(doc, parts, true)!;
    const key = parts[parts.length - 1];
    const current = parent[key] ?? [];
    if (!Array.isArray(current)) throw new ApiError("internal_error", `storage: cannot $push to '${path}', which is not an array`);
    put(parent, key, [...current, value]);
  }
  return doc;
}
