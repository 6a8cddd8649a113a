/**
 * The worst expressions the validator lets through and the largest inputs (64 KiB of JSON) they
 * meet: measured by bench/expressions.ts, and checked to evaluate or fail clearly by
 * test/unit/services/workflows/expression-cost.test.ts.
 */
export const INPUT_BYTES = 64 * 1024;

const fill = <T>(make: (i: number) => T): T[] => {
  const list: T[] = [];
  while (JSON.stringify(list).length < INPUT_BYTES - 200) list.push(make(list.length));
  return list;
};
export const inputs = {
  items: { items: fill((i) => ({ name: `item-${i}`, price: 12.5 + i, qty: i % 7, tags: ["a", "b"] })) },
  zeros: { l: fill(() => 0) },
  text: { s: "a,".repeat((INPUT_BYTES - 20) / 2) },
};

export const worst: [string, keyof typeof inputs][] = [
  [
    'input.items.filter(x, x.name.contains("1") && x.price * 2.0 > 10.0 && x.tags.exists(t, t == "b")).map(x, x.name + ":" + string(x.price)).size() + input.items.map(x, x.qty).size()',
    "items",
  ],
  ["input.items.map(x, x.price * x.qty + x.price / 2.0 - x.qty).sum()", "items"],
  [
    "input.items.all(x, x.tags.size() == 2 && x.name.startsWith('item') && x.price > 0 && x.qty >= 0 && x.name.lower().upper() != '')",
    "items",
  ],
  ["input.l.map(x, x + 1).sum() + input.l.filter(x, x == 0).size() + input.l.map(x, x * 2).max()", "zeros"],
  ['input.s.split(",").map(c, c + c + c + c).join("")', "text"],
  ['input.s.split("").filter(c, c == "a").size()', "text"],
  ['size(input.s.upper().lower().trim() + input.s + input.s) + input.s.split(",").size()', "text"],
  ["string(input) + string(input)", "items"],
];
