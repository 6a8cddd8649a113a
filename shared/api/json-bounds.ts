/** The bounds a JSON text is held to and the shape of a fault found against them (see json-limits.ts). */

/** Levels of objects and arrays in one value, the outermost value being level 1. */
export const MAX_JSON_DEPTH = 32;
/** Keys of one object in a request body. */
export const MAX_JSON_OBJECT_KEYS = 1_000;
/** Keys of all the objects in a request body together. */
export const MAX_JSON_KEYS = 10_000;
/** Items of all the arrays in a request body together. */
export const MAX_JSON_ITEMS = 50_000;

/** What a text is held to: nesting, and (optionally) keys per object and in all, array items in all, exact numbers. */
export interface JsonLimits {
  depth: number;
  objectKeys?: number;
  keys?: number;
  items?: number;
  exactNumbers?: boolean;
}

/** The limits of a request body. */
export const BODY_LIMITS: JsonLimits = {
  depth: MAX_JSON_DEPTH,
  objectKeys: MAX_JSON_OBJECT_KEYS,
  keys: MAX_JSON_KEYS,
  items: MAX_JSON_ITEMS,
  exactNumbers: true,
};

/** Limits with every bound set: a bare number bounds nesting only. */
export const limitsOf = (limits: number | JsonLimits): Required<JsonLimits> =>
  typeof limits === "number"
    ? { depth: limits, objectKeys: Infinity, keys: Infinity, items: Infinity, exactNumbers: false }
    : {
        depth: limits.depth,
        objectKeys: limits.objectKeys ?? Infinity,
        keys: limits.keys ?? Infinity,
        items: limits.items ?? Infinity,
        exactNumbers: limits.exactNumbers ?? false,
      };

/** One step of a path: an object's key or an array's index. */
export type PathSegment = string | number;

/**
 * Where a value breaks a limit. `too_wide`: the object at `path` has too many keys; `too_many_keys`:
 * the body has too many in all, the limit crossed in the object at `path`; `too_many_items`: as
 * many, of array items, crossed in the array at `path`; `inexact_number`: the number at `path` is
 * not one a double holds exactly. `key` when it is the key of the member at `path` that is ill-formed.
 */
export type JsonFault = {
  kind: "too_deep" | "not_well_formed" | "too_wide" | "too_many_keys" | "too_many_items" | "inexact_number";
  path: PathSegment[];
  key?: true;
};

export type JsonCheck = { ok: true; value: unknown } | { ok: false; kind: "invalid_json" } | ({ ok: false } & JsonFault);
