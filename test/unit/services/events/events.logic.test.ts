import { checkEmittable } from "../../../../services/events/events.logic";

describe("checkEmittable", () => {
  it("measures data as JSON bytes", () => {
    expect(checkEmittable("a.b", undefined)).toEqual({});
    expect(() => checkEmittable("a.b", { s: "é".repeat(33_000) })).toThrow(/65536/);
  });
});
