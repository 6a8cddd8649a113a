import { monotonicFactory } from "ulid";

export const ID_PREFIXES = ["org", "mem", "key", "wf", "run", "evt", "wh", "del", "req"] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

const nextUlid = monotonicFactory();

/** A random, time-sortable identifier such as `key_01jdx3…` (ULID, lower-cased). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid().toLowerCase()}`;
}

const ID_SHAPE = /^[a-z]+_[0-9a-hjkmnp-tv-z]{26}$/;

/** True when `value` has the shape of an id with that prefix (cheap check before any lookup). */
export function isId(prefix: IdPrefix, value: unknown): value is string {
  return typeof value === "string" && value.startsWith(`${prefix}_`) && ID_SHAPE.test(value);
}

/** ISO 8601 UTC with milliseconds, the one timestamp format on the wire and in the store. */
export const nowIso = (): string => new Date().toISOString();
