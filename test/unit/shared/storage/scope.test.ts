import fc from "fast-check";
import { checkFilter, checkUpdate, scoped } from "../../../../shared/storage/scope";
import { ALL_TENANTS, type Filter, type Update } from "../../../../shared/storage/types";
import { applyUpdate } from "../../../../shared/storage/update";

const refused = (run: () => unknown, message: RegExp) =>
  expect(run).toThrow(expect.objectContaining({ type: "internal_error", message: expect.stringMatching(message) }));

describe("filters, as both engines accept them", () => {
  it("accepts equality with a scalar or null, and the supported operators", () => {
    const ok: Filter[] = [
      { status: "due", n: 1, flag: true, gone: null, "nested.a": 2 },
      { n: { $in: [1, "a", null, false] }, m: { $nin: [] }, s: { $ne: null } },
      { n: { $gt: 1, $lte: 5 }, s: { $lt: "b", $gte: "a" }, t: { $exists: false } },
    ];
    for (const filter of ok) expect(checkFilter(filter)).toBe(filter);
  });

  it("refuses an undefined value anywhere, which MongoDB would drop and so widen the filter", () => {
    refused(() => checkFilter({ status: undefined as never }), /'status' is undefined/);
    for (const op of ["$in", "$nin", "$ne", "$lt", "$lte", "$gt", "$gte", "$exists"])
      refused(() => checkFilter({ n: { [op]: undefined } }), new RegExp(`'\\${op}' on 'n'`));
    refused(() => checkFilter({ n: { $in: [1, undefined] } }), /\$in/);
  });

  it("refuses values neither engine compares alike: non-finite numbers, arrays, objects, ranges over booleans or null", () => {
    const bad = fc.oneof(
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY).map((n) => ({ n })),
      fc.array(fc.integer(), { maxLength: 3 }).map((a) => ({ n: a })),
      fc
        .constantFrom("$lt", "$lte", "$gt", "$gte")
        .chain((op) => fc.constantFrom(true, null, [1], { a: 1 }).map((v) => ({ n: { [op]: v } }))),
      fc.constantFrom(
        { n: { $eq: 1 } },
        { n: { $regex: "a" } },
        { n: { a: 1 } },
        { n: { $exists: 1 } },
        { n: { $in: "a" } },
        { n: { $in: [[1]] } },
      ),
    );
    fc.assert(fc.property(bad, (filter) => refused(() => checkFilter(filter as Filter), /storage: /)));
  });

  it("refuses a path that is not a dotted identifier (no $where, no key from a request)", () => {
    for (const path of ["$where", "$or", "a..b", "a.$", "", "1a", "a b"]) refused(() => checkFilter({ [path]: 1 }), /not a field path/);
  });

  it("scopes a checked filter to the tenant, which a filter cannot widen", () => {
    expect(scoped({ org_id: "o", environment: "live" }, { org_id: "other", n: 1 })).toEqual({ org_id: "o", environment: "live", n: 1 });
    expect(scoped(ALL_TENANTS, { n: 1 })).toEqual({ n: 1 });
    refused(() => scoped(ALL_TENANTS, { n: undefined as never }), /undefined/);
  });
});

describe("updates, as both engines apply them", () => {
  it("turns a $set to undefined into an $unset, as JSON makes of it", () => {
    expect(checkUpdate({ $set: { a: 1, b: undefined }, $inc: { n: 1 } })).toEqual({ $set: { a: 1 }, $unset: { b: true }, $inc: { n: 1 } });
  });

  it("refuses overlapping paths, in one operator or across them", () => {
    const overlapping: Update[] = [
      { $set: { a: 1, "a.b": 2 } },
      { $set: { a: 1 }, $unset: { a: true } },
      { $inc: { "x.y": 1 }, $push: { "x.y.z": 1 } },
      { $set: { "s.0": 1 }, $unset: { s: true } },
    ];
    for (const update of overlapping) refused(() => checkUpdate(update), /overlap/);
    expect(() => checkUpdate({ $set: { a: 1, ab: 2, "b.a": 1 }, $unset: { "b.b": true } })).not.toThrow();
  });

  it("refuses other operators, bad paths, tenant fields, $inc by a non-number and $push of undefined", () => {
    refused(() => checkUpdate({ $setOnInsert: { a: 1 } } as Update), /unsupported update operator/);
    refused(() => checkUpdate({ $set: { "a.$": 1 } }), /not a field path/);
    refused(() => checkUpdate({ $set: { "a.__proto__": 1 } }), /not a field path/);
    for (const field of ["id", "org_id", "environment", "environment.x", "_id"])
      refused(() => checkUpdate({ $set: { [field]: "x" } }), /may not change/);
    for (const by of [Number.NaN, Number.POSITIVE_INFINITY, "1", undefined])
      refused(() => checkUpdate({ $inc: { n: by as number } }), /cannot \$inc/);
    refused(() => checkUpdate({ $push: { tags: undefined } }), /cannot \$push undefined/);
  });

  it("refuses to write through a value that cannot hold the path, as MongoDB does; an $unset there changes nothing", () => {
    for (const holder of [5, "s", null, true, [1]])
      refused(() => applyUpdate({ a: holder }, { $set: { "a.b": 1 } }), /cannot write 'a\.b' through 'a'/);
    refused(() => applyUpdate({ a: 5 }, { $inc: { "a.b": 1 } }), /through 'a'/);
    expect(applyUpdate({ a: 5 }, { $unset: { "a.b": true } })).toEqual({ a: 5 });
    expect(applyUpdate({ a: [1, 2] }, { $set: { "a.1": 9 } })).toEqual({ a: [1, 9] });
    expect(applyUpdate({}, { $set: { "a.b": 1 } })).toEqual({ a: { b: 1 } });
  });
});
