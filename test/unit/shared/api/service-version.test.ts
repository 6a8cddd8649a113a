import fc from "fast-check";
import { API_VERSIONS, resolveVersion, SERVICE_VERSION_PATTERN } from "../../../../shared/api/versions";

/** The API reference's pattern for Service-Version against what the gateway takes. */
describe("SERVICE_VERSION_PATTERN", () => {
  const pattern = new RegExp(SERVICE_VERSION_PATTERN);

  it("matches every version and refuses what a fuzzer sent (0, partial dates, months and days out of range)", () => {
    for (const version of API_VERSIONS) expect(pattern.test(version)).toBe(true);
    for (const value of ["0", "2026-11", "2026-1-01", "2026-13-01", "2026-00-10", "2026-11-32", "2026-11-00", "20261101"]) {
      expect(pattern.test(value)).toBe(false);
    }
  });

  it("refuses nothing the gateway takes: every date it answers under matches", () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date(`${API_VERSIONS[0]}T00:00:00Z`), max: new Date("9999-12-31T00:00:00Z"), noInvalidDate: true }),
        (d) => {
          const value = d.toISOString().slice(0, 10);
          expect(() => resolveVersion(value, undefined)).not.toThrow();
          expect(pattern.test(value)).toBe(true);
        },
      ),
    );
  });
});
