import fc from "fast-check";
import { checkPageNumbers, pageByKey } from "../../../../shared/api/pagination";

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
