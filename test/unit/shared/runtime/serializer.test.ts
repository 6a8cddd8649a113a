import fc from "fast-check";
import { MsgpackrSerializer } from "../../../../shared/runtime/serializer";
import { jsonWithOddKeys as value } from "../../../helpers/odd-json";

describe("the cluster's serializer", () => {
  const serializer = new MsgpackrSerializer();
  const roundTrip = (v: unknown) => serializer.deserialize(serializer.serialize({ params: { data: v } })).params.data;

  it("carries every key as it is, __proto__ included", () => {
    const data = JSON.parse('{"__proto__":{"__proto__":[{"__proto_":1,"__proto___":2}]},"constructor":3,"a.b":4,"$x":5,"":6}');
    const back = roundTrip(data);
    expect(JSON.stringify(back)).toBe(JSON.stringify(data));
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.keys(back)).toEqual(["__proto__", "constructor", "a.b", "$x", ""]);
  });

  it("round-trips any JSON value with odd keys", () => {
    fc.assert(
      fc.property(value, (v) => {
        expect(JSON.stringify(roundTrip(v))).toBe(JSON.stringify(v));
      }),
      { numRuns: 300 },
    );
  });
});
