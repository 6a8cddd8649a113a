import { compile, evaluate, ExpressionError, MAX_EVALUATION_STEPS, toCel } from "../../../../services/workflows/expressions/cel";

/**
 * The cost bound: the worst expressions the validator lets through, on the largest input (64 KiB
 * of JSON), either evaluate or fail within 5 ms of CPU each. CPU time, not wall time, so that a
 * busy machine does not decide the result.
 */
const LIMIT_MS = 5;
const INPUT_BYTES = 64 * 1024;

const fill = <T>(make: (i: number) => T): T[] => {
  const list: T[] = [];
  while (JSON.stringify(list).length < INPUT_BYTES - 200) list.push(make(list.length));
  return list;
};
const inputs = {
  items: { items: fill((i) => ({ name: `item-${i}`, price: 12.5 + i, qty: i % 7, tags: ["a", "b"] })) },
  zeros: { l: fill(() => 0) },
  text: { s: "a,".repeat((INPUT_BYTES - 20) / 2) },
};

const worst: [string, keyof typeof inputs][] = [
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

function cpuMs(f: () => void, runs: number): number {
  f(); // the first run compiles the library's paths
  const start = process.cpuUsage();
  for (let i = 0; i < runs; i++) f();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / runs;
}

describe(`an expression's cost`, () => {
  it.each(worst)("stays under 5 ms of CPU on a 64 KiB input, or fails clearly: %s", (source, which) => {
    const compiled = compile(source, "step");
    const vars = { input: toCel(inputs[which]) };
    let outcome = "";
    const ms = cpuMs(() => {
      try {
        evaluate(compiled, vars);
        outcome = "evaluated";
      } catch (err) {
        expect(err).toBeInstanceOf(ExpressionError);
        outcome = (err as Error).message;
      }
    }, 20);
    expect(outcome === "evaluated" || outcome.length > 10).toBe(true);
    expect(ms).toBeLessThan(LIMIT_MS);
    console.log(`${ms.toFixed(2)} ms ${outcome.slice(0, 60)} :: ${source.slice(0, 60)}`);
  });

  it(`stops an evaluation after ${MAX_EVALUATION_STEPS} steps, saying why`, () => {
    const compiled = compile("input.l.map(x, x + 1).size()", "step");
    expect(() => evaluate(compiled, { input: toCel(inputs.zeros) })).toThrow(/over 5000 evaluation steps/);
  });

  it("refuses matches(), whose regular expression could take unbounded time", () => {
    expect(() => compile('input.s.matches("(a+)+$")', "step")).toThrow(/matches\(\) is not available/);
  });
});
