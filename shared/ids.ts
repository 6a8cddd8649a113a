import { randomFillSync } from "node:crypto";
import { decodeTime, encodeTime, monotonicFactory } from "ulid";

export const ID_PREFIXES = ["org", "mem", "key", "wf", "run", "evt", "wh", "del", "req", "rcv", "sec", "aud", "blk", "hkr"] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

/**
 * Random bytes drawn from a pool refilled 4 KiB at a time: ulid's default asks the CSPRNG once per
 * character, and every request makes at least one id.
 */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function pooledRandom(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++] / 256;
}

const nextUlid = monotonicFactory(pooledRandom);

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

/**
 * The lowest id with that prefix made at `ms` (ms since the epoch): ids are time-ordered, so a range
 * of creation times is a range of ids, read along the index every list has on `id`.
 */
export const idFloorAt = (prefix: IdPrefix, ms: number): string =>
  // No id is made before 1970: a time before it is a floor below every id (ULIDs cannot encode it).
  `${prefix}_${encodeTime(Math.max(0, ms), 10).toLowerCase()}${"0".repeat(16)}`;

/** The time (ms) an id of newId was made at: what a time range of ids (idFloorAt) compares. */
export const timeOfId = (id: string): number => decodeTime(id.slice(id.indexOf("_") + 1).toUpperCase());
