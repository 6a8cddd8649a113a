import fc from "fast-check";
import {
  BODY_LIMITS,
  decimalKey,
  MAX_JSON_DEPTH,
  MAX_JSON_ITEMS,
  MAX_JSON_KEYS,
  MAX_JSON_OBJECT_KEYS,
  parseJsonWithinLimits,
  scanJson,
} from "../../../../shared/api/json-limits";

const objectOf = (n: number, prefix = "k") => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":${i}`).join(",")}}`;

describe("key limits of request bodies", () => {
  it(`takes ${MAX_JSON_OBJECT_KEYS} keys in one object and refuses one more, naming the object`, () => {
    expect(parseJsonWithinLimits(`{"data":${objectOf(MAX_JSON_OBJECT_KEYS)}}`, BODY_LIMITS)).toMatchObject({ ok: true });
    expect(parseJsonWithinLimits(`{"data":{"a":[1,${objectOf(MAX_JSON_OBJECT_KEYS + 1)}]}}`, BODY_LIMITS)).toEqual({
      ok: false,
      kind: "too_wide",
      path: ["data", "a", 1],
    });
    expect(parseJsonWithinLimits(objectOf(MAX_JSON_OBJECT_KEYS + 1), BODY_LIMITS)).toEqual({ ok: false, kind: "too_wide", path: [] });
  });

  it(`takes ${MAX_JSON_KEYS} keys in all and refuses one more, naming where the count was crossed`, () => {
    const per = MAX_JSON_KEYS / 10 - 1;
    const items = Array.from({ length: 10 }, () => objectOf(per));
    // 10 × 999 keys, `data` and `extra`, and the 11th object's keys cross the limit.
    expect(parseJsonWithinLimits(`{"data":[${items.join(",")}],"x":${objectOf(8)}}`, BODY_LIMITS)).toMatchObject({ ok: true });
    expect(parseJsonWithinLimits(`{"data":[${items.join(",")}],"x":${objectOf(9)}}`, BODY_LIMITS)).toEqual({
      ok: false,
      kind: "too_many_keys",
      path: ["x"],
    });
  });

  it(`takes ${MAX_JSON_ITEMS} array items in all and refuses one more, naming the array`, () => {
    const half = MAX_JSON_ITEMS / 2;
    const items = (n: number, item = "{}") => `[${Array(n).fill(item).join(",")}]`;
    expect(parseJsonWithinLimits(`{"a":${items(half)},"b":[[],${items(half - 2, "0")}]}`, BODY_LIMITS)).toMatchObject({ ok: true });
    expect(parseJsonWithinLimits(`{"a":${items(half)},"b":[[],${items(half - 1, "0")}]}`, BODY_LIMITS)).toEqual({
      ok: false,
      kind: "too_many_items",
      path: ["b", 1],
    });
    expect(parseJsonWithinLimits(`{"a":${items(MAX_JSON_ITEMS + 1, "[]")}}`, BODY_LIMITS)).toMatchObject({
      kind: "too_many_items",
      path: ["a"],
    });
  });

  it("calls a broken text broken, whatever its keys", () => {
    expect(parseJsonWithinLimits(`${objectOf(MAX_JSON_OBJECT_KEYS + 1)} x`, BODY_LIMITS)).toEqual({ ok: false, kind: "invalid_json" });
  });

  it("counts keys, not colons in strings or keys", () => {
    const colons = `{${Array.from({ length: MAX_JSON_OBJECT_KEYS }, (_, i) => `"a:${i}":"b:c:d"`).join(",")}}`;
    expect(parseJsonWithinLimits(colons, BODY_LIMITS)).toMatchObject({ ok: true });
  });

  it("leaves keys unbounded without key limits (the answers of http steps)", () => {
    expect(parseJsonWithinLimits(objectOf(MAX_JSON_OBJECT_KEYS * 3))).toMatchObject({ ok: true });
  });

  it("reports the first fault in the order of the text", () => {
    const deep = `${"[".repeat(MAX_JSON_DEPTH)}${"]".repeat(MAX_JSON_DEPTH)}`;
    const wide = objectOf(MAX_JSON_OBJECT_KEYS + 1);
    expect(parseJsonWithinLimits(`{"a":${deep},"b":${wide}}`, BODY_LIMITS)).toMatchObject({
      kind: "too_deep",
      path: ["a", ...Array(MAX_JSON_DEPTH - 1).fill(0)],
    });
    expect(parseJsonWithinLimits(`{"b":${wide},"a":${deep}}`, BODY_LIMITS)).toMatchObject({ kind: "too_wide", path: ["b"] });
  });

  it("agrees with a count of the parsed value's keys and items, for any JSON", () => {
    const limits = { depth: 6, objectKeys: 3, keys: 8, items: 6 };
    const keysOf = (v: unknown): { max: number; total: number; items: number } => {
      if (v === null || typeof v !== "object") return { max: 0, total: 0, items: 0 };
      const children = Object.values(v as object).map(keysOf);
      const own = Array.isArray(v) ? 0 : Object.keys(v as object).length;
      return {
        max: Math.max(own, ...children.map((c) => c.max)),
        total: own + children.reduce((a, c) => a + c.total, 0),
        items: (Array.isArray(v) ? v.length : 0) + children.reduce((a, c) => a + c.items, 0),
      };
    };
    fc.assert(
      fc.property(fc.json({ maxDepth: 4 }), (text) => {
        const { max, total, items } = keysOf(JSON.parse(text));
        const scanned = scanJson(text, limits);
        expect(scanned.valid).toBe(true);
        const fault = scanned.valid ? scanned.fault : null;
        const over = max > limits.objectKeys || total > limits.keys || items > limits.items;
        if (!over) expect(fault === null || fault.kind === "too_deep").toBe(true);
        else expect(fault).not.toBeNull();
        const checked = parseJsonWithinLimits(text, limits);
        if (!over && checked.ok === false) expect(checked.kind).toBe("too_deep");
      }),
    );
  });
});

describe("exact numbers in request bodies", () => {
  const check = (n: string) => parseJsonWithinLimits(`{"a":[1,{"b":${n}}]}`, BODY_LIMITS);

  it("refuses numbers that would change when stored, naming them", () => {
    for (const n of [
      "1e400",
      "-1e400",
      "9007199254740993",
      "-9007199254740993",
      "1e-400",
      "-0",
      "-0.0",
      "-0e3",
      "0.1000000000000000000001",
    ]) {
      expect(check(n)).toEqual({ ok: false, kind: "inexact_number", path: ["a", 1, "b"] });
    }
  });

  it("takes numbers a double holds exactly, however they are written", () => {
    for (const n of [
      "0",
      "0.0",
      "-1",
      "9007199254740992",
      "9007199254740994",
      "1e21",
      "1E+21",
      "1.5e-7",
      "0.1",
      "1.10",
      "123456789012345680e3",
      "5e-324",
      "1.7976931348623157e308",
    ]) {
      expect(check(n)).toMatchObject({ ok: true });
    }
  });

  it("agrees with a round trip through JSON for any double and any integer below 2^66", () => {
    fc.assert(
      fc.property(fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.bigInt({ min: -(2n ** 66n), max: 2n ** 66n })), (v) => {
        const text = typeof v === "bigint" ? v.toString() : Object.is(v, -0) ? "-0" : JSON.stringify(v);
        // What a store gives back: the text again (integers below 1e21 are written in digits), or not.
        const exact = typeof v === "bigint" ? BigInt(JSON.stringify(JSON.parse(text))) === v : !Object.is(v, -0);
        expect(check(text).ok).toBe(exact);
      }),
      { numRuns: 20_000 },
    );
  });

  it("compares decimals by value", () => {
    expect(decimalKey("1.50")).toBe(decimalKey("15e-1"));
    expect(decimalKey("0.15e1")).toBe(decimalKey("1.5"));
    expect(decimalKey("100")).toBe("1e2");
    expect(decimalKey("-0.000")).toBe("-0");
  });
});
