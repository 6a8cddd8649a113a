import fc from "fast-check";
import { parseJson } from "../../../../shared/api/json-parse";
import { jsonWithOddKeys } from "../../../helpers/odd-json";

describe("parseJson", () => {
  it("reads a key holding an escape as it is, after any key holding a backslash was parsed", () => {
    // What makes the V8 fault show: a key holding a backslash first, in an object of the same shape.
    JSON.parse('{"\\\\":1}');
    JSON.parse('{"a":0,"x\\\\":1,"b\\\\":2}');
    expect(Object.keys(parseJson('{"\\u0000":1}') as object)).toEqual(["\u0000"]);
    expect(Object.keys(parseJson('{"\\n":1}') as object)).toEqual(["\n"]);
    expect(Object.keys(parseJson('{"a":0,"x\\u0000":1,"b\\\\":2}') as object)).toEqual(["a", "x\u0000", "b\\"]);
  });

  it("gives what JSON.parse gives for any value, odd keys, escapes and __proto__ included", () => {
    fc.assert(
      fc.property(jsonWithOddKeys, fc.constantFrom(undefined, 2), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        expect(JSON.stringify(parseJson(text))).toBe(JSON.stringify(value));
      }),
      { numRuns: 300 },
    );
    const parsed = parseJson('{"__proto__":{"\\n":1},"k\\"":[1e400,-0.5,true,null,"\\ud83d\\ude00"]}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(Object.keys(parsed)).toEqual(["__proto__", 'k"']);
    expect(parsed['k"']).toEqual([Infinity, -0.5, true, null, "😀"]);
  });

  it("refuses what JSON.parse refuses", () => {
    for (const bad of ['{"\\n":1', '{"\\n" 1}', '{"\\n":1,}', "[1,]", '{"\\q":1}', ""]) expect(() => parseJson(bad)).toThrow(SyntaxError);
  });
});
