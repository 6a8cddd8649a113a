import fc from "fast-check";
import mongoose from "mongoose";
import { clientOptions } from "../../../../shared/storage/mongo-client";
import {
  decodeKey,
  encodeKey,
  fromStored,
  limitOf,
  plucked,
  storedFilter,
  storedSort,
  storedUpdate,
  toStored,
} from "../../../../shared/storage/mongo-docs";
import { anyJson, anyKey } from "../../../helpers/odd-json";

const { BSON } = mongoose.mongo;

/** What MongoDB refuses in a stored key: a dot, a leading `$`, NUL. */
// eslint-disable-next-line no-control-regex -- NUL is what BSON refuses in a key
const FORBIDDEN_KEY = /[.\u0000]|^\$/;

/** Through BSON as the driver writes and reads it with the store's client options: what a server would store. */
const throughBson = (doc: Record<string, unknown>) =>
  BSON.deserialize(BSON.serialize(doc, { ignoreUndefined: clientOptions().ignoreUndefined }));

/** Every key of a stored value, at every depth. */
function keysOf(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => keysOf(v, out));
  else if (value !== null && typeof value === "object")
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      keysOf(v, out);
    }
  return out;
}

describe("documents as stored in MongoDB", () => {
  it("encodes any key into one MongoDB accepts (no '.', no leading '$', no NUL) and decodes it back exactly", () => {
    fc.assert(
      fc.property(anyKey, (key) => {
        const stored = encodeKey(key);
        expect(stored).not.toMatch(FORBIDDEN_KEY);
        expect(stored).not.toBe("__proto__");
        expect(decodeKey(stored)).toBe(key);
      }),
      { numRuns: 2000 },
    );
  });

  it("encodes different keys differently", () => {
    fc.assert(fc.property(anyKey, anyKey, (a, b) => a === b || encodeKey(a) !== encodeKey(b)));
  });

  it("reads any JSON document back through BSON as JSON would carry it, its id as _id", () => {
    // Top-level fields are the services' own (never `_id`); below them, any key.
    const field = anyKey.filter((k) => k !== "_id" && k !== "id");
    fc.assert(
      fc.property(fc.dictionary(field, anyJson, { maxKeys: 6, noNullPrototype: true }), (fields) => {
        const doc = { id: "d1", org_id: "o", ...fields };
        const stored = toStored(doc);
        expect(stored._id).toBe("d1");
        expect(Object.hasOwn(stored, "id")).toBe(false);
        expect(keysOf(stored).filter((k) => FORBIDDEN_KEY.test(k))).toEqual([]);
        const back = fromStored<Record<string, unknown>>(throughBson(stored));
        expect(JSON.stringify(back)).toBe(JSON.stringify(JSON.parse(JSON.stringify(doc))));
      }),
      { numRuns: 300 },
    );
  });

  it("stores undefined as nothing (never null), numbers JSON cannot write as null, and -0 as 0", () => {
    const stored = throughBson(
      toStored({ id: "d", a: undefined, b: { c: undefined, d: 1 }, e: [undefined, 1], big: Number.POSITIVE_INFINITY, nan: NaN, neg: -0 }),
    );
    expect(stored).toEqual({ _id: "d", b: { d: 1 }, e: [null, 1], big: null, nan: null, neg: 0 });
    expect(Object.is(stored.neg, 0)).toBe(true);
    expect(Object.hasOwn(stored, "a")).toBe(false);
  });

  it("refuses a document that carries its own _id", () => {
    expect(() => toStored({ id: "d", _id: "x" })).toThrow(/_id/);
  });

  it("runs filters and sorts on `id` as `_id`, and every other path as written", () => {
    expect(storedFilter({ id: "a", org_id: "o", "nested.id": 1 })).toEqual({ _id: "a", org_id: "o", "nested.id": 1 });
    expect(storedSort({ id: 1, seq: -1 })).toEqual({ _id: 1, seq: -1 });
    expect(storedSort(undefined)).toBeUndefined();
  });

  it("stores an update's values as documents' values are, and $unset without values", () => {
    expect(
      storedUpdate({ $set: { payload: { "a.b": 1, big: Infinity } }, $unset: { x: true }, $inc: { n: 2 }, $push: { tags: { $x: 1 } } }),
    ).toEqual({
      $set: { payload: { "a%2Eb": 1, big: null } },
      $unset: { x: "" },
      $inc: { n: 2 },
      $push: { tags: { "%24x": 1 } },
    });
  });

  it("plucks dotted fields flat, as the embedded store does, leaving out null and absent ones", () => {
    const raw = { _id: "d", a: { b: 2, c: null }, s: "x", n: null };
    expect(plucked(raw, ["id", "a.b", "a.c", "s", "n", "missing", "s.deeper"])).toEqual({ id: "d", "a.b": 2, s: "x" });
  });

  it("reads a limit as both engines do: 0 is nothing, a negative one is no limit", () => {
    expect([limitOf(undefined), limitOf(0), limitOf(0.5), limitOf(-1), limitOf(3), limitOf(2.7)]).toEqual([
      undefined,
      "none",
      "none",
      undefined,
      3,
      2,
    ]);
  });
});
