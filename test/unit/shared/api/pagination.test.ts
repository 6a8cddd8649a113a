import fc from "fast-check";
import { checkPageNumbers, instantOf, pageByKey } from "../../../../shared/api/pagination";

describe("checkPageNumbers", () => {
  it("takes plain decimal digits only", () => {
    expect(() => checkPageNumbers({ page: "12", per_page: "100", limit: "5" })).not.toThrow();
    for (const [param, value] of [
      ["page", "1e1"],
      ["per_page", "0x10"],
      ["limit", "-1"],
      ["page", ["1", "2"]],
    ] as const) {
      expect(() => checkPageNumbers({ [param]: value })).toThrow(expect.objectContaining({ type: "parameter_invalid", data: { param } }));
    }
  });
});

describe("pageByKey", () => {
  // The list: a head in its own order, then a tail sorted by key (as a store's index reads it).
  const head = ["sys.b", "sys.a", "sys.c"];
  const tailOf = (keys: string[]) => {
    const sorted = [...new Set(keys)].filter((k) => !head.includes(k)).sort();
    return {
      sorted,
      tail: {
        after: async (key: string | undefined, n: number) => sorted.filter((k) => key === undefined || k > key).slice(0, n),
        before: async (key: string, n: number) =>
          sorted
            .filter((k) => k < key)
            .reverse()
            .slice(0, n),
      },
    };
  };

  it("walks the whole list once each way, in order, with any page size", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.stringMatching(/^[a-z]{1,3}$/), { maxLength: 12 }),
        fc.integer({ min: 1, max: 5 }),
        async (keys, limit) => {
          const { sorted, tail } = tailOf(keys);
          const all = [...head, ...sorted];
          const forward: string[] = [];
          for (let after: string | undefined, more = true; more;) {
            const page = await pageByKey(head, (k) => k, { limit, starting_after: after }, tail);
            forward.push(...page.items);
            more = page.has_more;
            after = page.items[page.items.length - 1];
          }
          expect(forward).toEqual(all);
          const backward: string[] = [all[all.length - 1]];
          for (let before = all[all.length - 1], more = true; more;) {
            const page = await pageByKey(head, (k) => k, { limit, ending_before: before }, tail);
            backward.unshift(...page.items);
            more = page.has_more;
            before = page.items[0];
          }
          expect(backward).toEqual(all);
        },
      ),
    );
  });

  it("takes a key the list does not hold as a position in the tail", async () => {
    const { tail } = tailOf(["b", "d"]);
    await expect(pageByKey(head, (k) => k, { limit: 5, starting_after: "c" }, tail)).resolves.toEqual({
      items: ["d"],
      limit: 5,
      has_more: false,
    });
    await expect(pageByKey(head, (k) => k, { limit: 1, ending_before: "c" }, tail)).resolves.toEqual({
      items: ["b"],
      limit: 1,
      has_more: true,
    });
  });
});

describe("instantOf", () => {
  it("takes ISO 8601 instants, leap days included", () => {
    for (const ok of [
      "2026-01-31T12:00:00Z",
      "2024-02-29T00:00:00Z",
      "2000-02-29T23:59:59.999Z",
      "0000-02-29T00:00:00Z",
      "2026-04-30T10:00:00+02:00",
    ])
      expect(instantOf("created_after", ok)).toBe(Date.parse(ok));
  });

  it("refuses a day its month does not have, which Date.parse would roll over", () => {
    for (const bad of [
      "2026-02-30T00:00:00Z",
      "2026-02-29T00:00:00Z",
      "1900-02-29T00:00:00Z",
      "2026-04-31T00:00:00Z",
      "2026-11-31T08:00:00Z",
    ]) {
      expect(() => instantOf("filter.created_after", bad)).toThrow(
        expect.objectContaining({ type: "parameter_invalid", data: { param: "filter.created_after" } }),
      );
    }
  });

  it("refuses what is not an instant", () => {
    for (const bad of ["2026-11-27", "yesterday", "+275760-09-13T00:00:00.000Z", "2026-13-01T00:00:00Z", "2026-01-01T23:60:00Z", ""])
      expect(() => instantOf("to", bad)).toThrow(expect.objectContaining({ type: "parameter_invalid" }));
  });
});
