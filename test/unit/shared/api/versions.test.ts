import { resolveVersion } from "../../../../shared/api/versions";

describe("resolveVersion", () => {
  it("uses the pinned version without a header and the latest on or before a date", () => {
    expect(resolveVersion(undefined, "2026-11-01")).toBe("2026-11-01");
    expect(resolveVersion("2026-11-01", undefined)).toBe("2026-11-01");
    expect(resolveVersion("2030-01-01", undefined)).toBe("2026-11-01");
  });
  it("rejects malformed and too-early dates", () => {
    expect(() => resolveVersion("2026-02-31", undefined)).toThrow(expect.objectContaining({ type: "invalid_version" }));
    expect(() => resolveVersion("2026-10-31", undefined)).toThrow(expect.objectContaining({ type: "unsupported_version" }));
  });
});
