import fc from "fast-check";
import {
  escapesLoneSurrogate,
  findJsonFault,
  formatPath,
  MAX_JSON_DEPTH,
  nestsDeeperThan,
  parseJsonWithinLimits,
  scanJson,
} from "../../../../shared/api/json-limits";
import { jsonWithOddKeys as value } from "../../../helpers/odd-json";

/** Levels of objects and arrays, the value itself being level 1 (scalars: 0). Recursive: test values are small. */
const depthOf = (v: unknown): number =>
  v === null || typeof v !== "object" ? 0 : 1 + Math.max(0, ...Object.values(v as Record<string, unknown>).map(depthOf));

/** `{"k":{"k":…}}` with `levels` objects, the innermost holding `inner`. */
const nestObjects = (levels: number, key = "a", inner = "1") =>
  `{"${key}":`.repeat(levels - 1) + `{"${key}":${inner}}` + "}".repeat(levels - 1);
const nestArrays = (levels: number) => "[".repeat(levels) + "]".repeat(levels);

describe("formatPath", () => {
  it("writes paths as the API names parameters", () => {
    expect(formatPath(["data", "a", 3, "b"])).toBe("data.a[3].b");
    expect(formatPath(["url"], "steps[2]")).toBe("steps[2].url");
    expect(formatPath(["x-id"], "headers")).toBe("headers.x-id");
    expect(formatPath(["a.b", "", "$x", "\ud800"], "data")).toBe('data["a.b"][""]["$x"]["\\ud800"]');
    expect(formatPath([0, 1])).toBe("[0][1]");
    expect(formatPath(["x".repeat(500)])).toBe(`["${"x".repeat(100)}…"]`);
  });
});

describe("nesting", () => {
  it(`accepts ${MAX_JSON_DEPTH} levels and refuses ${MAX_JSON_DEPTH + 1}, naming where the limit is crossed`, () => {
    expect(parseJsonWithinLimits(nestObjects(MAX_JSON_DEPTH))).toMatchObject({ ok: true });
    expect(parseJsonWithinLimits(nestArrays(MAX_JSON_DEPTH))).toMatchObject({ ok: true });
    // Empty containers count; scalars do not.
    expect(parseJsonWithinLimits(nestObjects(MAX_JSON_DEPTH, "a", "{}"))).toEqual({
      ok: false,
      kind: "too_deep",
      path: Array(MAX_JSON_DEPTH).fill("a"),
    });
    expect(parseJsonWithinLimits(nestArrays(MAX_JSON_DEPTH + 1))).toEqual({
      ok: false,
      kind: "too_deep",
      path: Array(MAX_JSON_DEPTH).fill(0),
    });
    const mixed = `{"data":{"list":[1,{"x":${nestArrays(MAX_JSON_DEPTH - 3)}}]}}`;
    expect(parseJsonWithinLimits(mixed)).toEqual({
      ok: false,
      kind: "too_deep",
      path: ["data", "list", 1, "x", ...Array(MAX_JSON_DEPTH - 4).fill(0)],
    });
    // The first place in the text where it is crossed; keys are decoded.
    const two = `{"ok":${nestArrays(10)},"a\\u002eb":[0,0,${nestArrays(40)}],"later":${nestArrays(40)}}`;
    expect(parseJsonWithinLimits(two)).toEqual({ ok: false, kind: "too_deep", path: ["a.b", 2, ...Array(MAX_JSON_DEPTH - 2).fill(0)] });
  });

  it("refuses 1 MiB of brackets quickly, as invalid JSON when it is broken and as too deep when it is not", () => {
    const started = performance.now();
    expect(parseJsonWithinLimits("[".repeat(1 << 20))).toEqual({ ok: false, kind: "invalid_json" });
    expect(parseJsonWithinLimits(`{"data":${"[".repeat(1 << 20)}`)).toEqual({ ok: false, kind: "invalid_json" });
    expect(parseJsonWithinLimits(`{"data":${nestArrays(1 << 19)}}`)).toMatchObject({ ok: false, kind: "too_deep" });
    expect(parseJsonWithinLimits(`{"data":${nestObjects(100_000)}}`)).toMatchObject({ ok: false, kind: "too_deep" });
    expect(parseJsonWithinLimits(`${nestArrays(1 << 19)} x`)).toEqual({ ok: false, kind: "invalid_json" });
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it("counts like a recursive count, for any JSON value", () => {
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 6 }), (v, max) => {
        const text = JSON.stringify(v);
        expect(nestsDeeperThan(text, max)).toBe(depthOf(v) > max);
        const scanned = scanJson(text, max);
        expect(scanned.valid).toBe(true);
        if (scanned.valid) expect(scanned.tooDeep !== null).toBe(depthOf(v) > max);
      }),
      { numRuns: 300 },
    );
  });

  it("tells valid from invalid JSON exactly as JSON.parse does", () => {
    const parses = (text: string) => {
      try {
        JSON.parse(text);
        return true;
      } catch {
        return false;
      }
    };
    const mutated = fc
      .tuple(
        fc.json({ depthSize: "small" }),
        fc.nat(),
        fc.constantFrom("", "[", "]", "{", "}", ",", ":", '"', "\\", "-", "0", "e", ".", " ", "\u0001", "t", "\\u12"),
        fc.nat(3),
      )
      .map(([text, at, insert, cut]) => {
        const i = at % (text.length + 1);
        return text.slice(0, i) + insert + text.slice(i + cut);
      });
    const jsonish = fc.string({ unit: fc.constantFrom(...'{}[]:,"\\ 0123-+.eEtruefalsn\u0000\n\t'), maxLength: 30 });
    fc.assert(
      fc.property(fc.oneof(mutated, jsonish, fc.json()), (text) => {
        expect(scanJson(text, 0).valid).toBe(parses(text));
      }),
      { numRuns: 3000 },
    );
  });
});

describe("well-formed text", () => {
  it("refuses lone surrogates in values and keys, naming the first in the text", () => {
    expect(parseJsonWithinLimits('{"data":{"a":"ok","b":["x","\\ud800"]}}')).toEqual({
      ok: false,
      kind: "not_well_formed",
      path: ["data", "b", 1],
    });
    expect(parseJsonWithinLimits('{"data":{"\\udc00":1}}')).toEqual({
      ok: false,
      kind: "not_well_formed",
      path: ["data", "\udc00"],
      key: true,
    });
    expect(parseJsonWithinLimits('{"a":"\\ud800","\\udc00":1}')).toEqual({ ok: false, kind: "not_well_formed", path: ["a"] });
    expect(parseJsonWithinLimits('{"\\udc00":1,"a":"\\ud800"}')).toEqual({
      ok: false,
      kind: "not_well_formed",
      path: ["\udc00"],
      key: true,
    });
    // A pair, a backslash followed by text, a replacement character: all fine.
    expect(parseJsonWithinLimits('{"a":"\\ud83d\\ude00","b":"\\\\ud800","c":"\ufffd"}')).toEqual({
      ok: true,
      value: { a: "😀", b: "\\ud800", c: "\ufffd" },
    });
  });

  it("finds any lone surrogate in any value", () => {
    fc.assert(
      fc.property(value, fc.string({ unit: "binary", maxLength: 3 }), (v, s) => {
        const text = JSON.stringify({ v, s });
        const checked = parseJsonWithinLimits(text, 1000);
        expect(checked.ok).toBe(text.isWellFormed() && JSON.stringify(v).isWellFormed() && s.isWellFormed());
      }),
      { numRuns: 300 },
    );
  });

  it("tells lone surrogates from pairs in the text, however the client escapes it", () => {
    const unit = fc.oneof(
      fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
      fc.constantFrom("\\", "u", "d", "D", "8", "c", "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", '"'),
    );
    // Each code unit as it is or as a \u escape in either case; quotes and backslashes as \" and \\
    // or \u; controls and surrogates always escaped (UTF-8 text cannot hold a raw surrogate).
    const encoded = fc.array(fc.tuple(unit, fc.boolean(), fc.boolean()), { maxLength: 12 }).map((parts) => {
      let s = "";
      let text = '"';
      for (const [u, escape, upper] of parts) {
        for (const ch of u.split("")) {
          s += ch;
          const code = ch.charCodeAt(0);
          const must = code < 0x20 || (code >= 0xd800 && code <= 0xdfff);
          if (!escape && (ch === '"' || ch === "\\")) text += `\\${ch}`;
          else if (escape || must) {
            const hex = code.toString(16).padStart(4, "0");
            text += `\\u${upper ? hex.toUpperCase() : hex}`;
          } else text += ch;
        }
      }
      return { s, text: `${text}"` };
    });
    fc.assert(
      fc.property(encoded, ({ s, text }) => {
        expect(JSON.parse(text)).toBe(s);
        expect(escapesLoneSurrogate(text)).toBe(!s.isWellFormed());
        expect(escapesLoneSurrogate(JSON.stringify(s))).toBe(!s.isWellFormed());
      }),
      { numRuns: 5000 },
    );
    expect(escapesLoneSurrogate('"\\\\ud800"')).toBe(false);
    expect(escapesLoneSurrogate('"\\\\\\ud800"')).toBe(true);
    expect(escapesLoneSurrogate('"\\\\ud83d\\ude00"')).toBe(true);
    expect(escapesLoneSurrogate('"\\uD83D\\uDE00\\ud83d\\udE00"')).toBe(false);
  });

  it("checks values in memory too, from a given level", () => {
    expect(findJsonFault({ a: [{ b: "\udfff" }] })).toEqual({ kind: "not_well_formed", path: ["a", 0, "b"] });
    expect(findJsonFault(JSON.parse(nestArrays(31)), { level: 2 })).toBeNull();
    expect(findJsonFault(JSON.parse(nestArrays(32)), { level: 2 })).toEqual({ kind: "too_deep", path: Array(31).fill(0) });
  });
});
