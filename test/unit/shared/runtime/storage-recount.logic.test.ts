import fc from "fast-check";
import { STORAGE_POLICIES, storedSize } from "../../../../shared/records/storage-quota";
import { addSizes, counterFixes, difference, type CounterRow, type TenantBytes } from "../../../../shared/runtime/storage-recount.logic";

const row = (id: string, bytes: number): CounterRow => {
  const [org_id, environment] = id.split(":");
  return { id, org_id, environment: environment as "live" | "test", bytes };
};
const sum = (id: string, bytes: number): [string, TenantBytes] => {
  const [org_id, environment] = id.split(":");
  return [id, { org_id, environment: environment as "live" | "test", bytes }];
};

describe("addSizes", () => {
  it("sums each document's counted size per organization and environment, org-wide documents as live", () => {
    const policy = STORAGE_POLICIES.webhook_deliveries;
    const docs = [
      { id: "a", org_id: "org_1", environment: "test", lease: "x".repeat(50), body: "1" },
      { id: "b", org_id: "org_1", body: "22" },
      { id: "c", org_id: "org_1", environment: "live", body: "333" },
      { id: "d", body: "no organization" },
    ];
    const sums = new Map<string, TenantBytes>();
    addSizes(sums, docs, policy);
    expect(Object.fromEntries(sums)).toEqual({
      "org_1:test": { org_id: "org_1", environment: "test", bytes: storedSize(docs[0], policy.volatile) },
      "org_1:live": {
        org_id: "org_1",
        environment: "live",
        bytes: storedSize(docs[1], policy.volatile) + storedSize(docs[2], policy.volatile),
      },
    });
  });
});

describe("counterFixes", () => {
  it("sets rows that differ, creates missing ones, removes those of tenants with nothing left, in id order", () => {
    const measured = new Map([sum("org_b:live", 10), sum("org_a:test", 7), sum("org_c:live", 5)]);
    const rows = [row("org_c:live", 5), row("org_b:live", 3), row("org_z:live", 0), row("org_y:test", 40)];
    expect(counterFixes(measured, rows)).toEqual([
      { id: "org_a:test", org_id: "org_a", environment: "test", before: null, after: 7 },
      { id: "org_b:live", org_id: "org_b", environment: "live", before: 3, after: 10 },
      { id: "org_y:test", org_id: "org_y", environment: "test", before: 40, after: null },
      { id: "org_z:live", org_id: "org_z", environment: "live", before: 0, after: null },
    ]);
  });

  it("sets a row whose count is not a number", () => {
    const fixes = counterFixes(new Map([sum("org_a:live", 9)]), [{ ...row("org_a:live", 0), bytes: null as unknown as number }]);
    expect(fixes).toHaveLength(1);
    expect(fixes[0].after).toBe(9);
    expect(difference(fixes[0])).toBe(9);
  });

  it("applied to the rows, leaves exactly the measured counts (any rows, any sums)", () => {
    const id = fc.tuple(fc.constantFrom("org_a", "org_b", "org_c", "org_d"), fc.constantFrom("live", "test")).map(([o, e]) => `${o}:${e}`);
    const counts = fc.dictionary(id, fc.nat(10_000));
    fc.assert(
      fc.property(counts, counts, (rowCounts, sums) => {
        const measured = new Map(
          Object.entries(sums)
            .filter(([, b]) => b > 0)
            .map(([k, b]) => sum(k, b)),
        );
        const state = new Map(Object.entries(rowCounts));
        const fixes = counterFixes(
          measured,
          [...state].map(([k, b]) => row(k, b)),
        );
        const before = [...state.values()].reduce((a, b) => a + b, 0);
        for (const fix of fixes) {
          expect(fix.before).toBe(state.has(fix.id) ? state.get(fix.id) : null);
          if (fix.after === null) state.delete(fix.id);
          else state.set(fix.id, fix.after);
        }
        expect(Object.fromEntries(state)).toEqual(Object.fromEntries([...measured].map(([k, v]) => [k, v.bytes])));
        expect(fixes.reduce((a, f) => a + difference(f), before)).toBe([...measured.values()].reduce((a, v) => a + v.bytes, 0));
        // Once set right, nothing is left to do.
        expect(
          counterFixes(
            measured,
            [...state].map(([k, b]) => row(k, b)),
          ),
        ).toEqual([]);
      }),
    );
  });
});
