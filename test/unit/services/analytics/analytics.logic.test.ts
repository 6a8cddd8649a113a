import { windowOf } from "../../../../services/analytics/analytics.logic";

describe("analytics windows", () => {
  const now = Date.parse("2026-11-23T10:30:00Z");
  it("defaults to the last day (hours) or 30 days (days), ending now", () => {
    expect(windowOf(undefined, undefined, "hour", now)).toEqual({ from: now - 86_400_000, to: now });
    expect(windowOf(undefined, undefined, "day", now)).toEqual({ from: now - 30 * 86_400_000, to: now });
    expect(windowOf("2026-11-01", "2026-11-02T00:00:00+01:00", "hour", now)).toEqual({
      from: Date.parse("2026-11-01T00:00:00Z"),
      to: Date.parse("2026-11-01T23:00:00Z"),
    });
  });
  it.each([
    ["2026-11-02", "2026-11-01", "from"],
    ["2026-01-01", "2026-06-01", "from"],
    ["11/01/2026", undefined, "from"],
    [undefined, "2026-11-01T10:00", "to"],
  ])("refuses from=%s to=%s naming %s", (from, to, param) => {
    expect(() => windowOf(from, to, "hour", now)).toThrow(expect.objectContaining({ data: expect.objectContaining({ param }) }));
  });
});
