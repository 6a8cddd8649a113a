import { compile, evaluate, ExpressionError, toCel } from "../../../../services/workflows/expressions/cel";

const run = (source: string, vars: Record<string, unknown> = {}) =>
  evaluate(compile(source, "step"), Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, toCel(v)])));
const fault = (source: string, vars: Record<string, unknown> = {}): ExpressionError => {
  try {
    run(source, vars);
  } catch (err) {
    if (err instanceof ExpressionError) return err;
    throw err;
  }
  throw new Error(`${source} did not fail`);
};

describe("CEL expressions", () => {
  const input = { qty: 3, price: 2.5, whole: 4, name: " Ada ", tags: ["a", "b"], items: [{ n: 1 }, { n: 2.5 }], nothing: null };

  it("numbers work as a JSON user expects: int and double mix, results are JSON numbers", () => {
    expect(run("input.qty * 2", { input })).toBe(6);
    expect(run("input.price * 2", { input })).toBe(5);
    expect(run("input.qty * 1.5", { input })).toBe(4.5);
    expect(run("input.whole / 8", { input })).toBe(0);
    expect(run("input.whole / 8.0", { input })).toBe(0.5);
    expect(run("1.5 * 2")).toBe(3);
    expect(run("input.qty > 2.5 && input.price < 3", { input })).toBe(true);
    expect(run("input.qty == 3.0", { input })).toBe(true);
  });

  it("gives no negative zero back: JSON has none, and the store refuses it", () => {
    expect(Object.is(run("-5e-324 * 0.0"), 0)).toBe(true);
    expect(Object.is(run("default(input.b, (-5e-324 * 0.0))", { input: {} }), 0)).toBe(true);
    expect(Object.is(run("-0.0"), 0)).toBe(true);
  });

  it("has the string, list and math helpers", () => {
    expect(run("input.name.trim().lower() + input.name.trim().upper()", { input })).toBe("adaADA");
    expect(run('"a,b,c".split(",").join("-")')).toBe("a-b-c");
    expect(run("size(input.tags) + size(input.name)", { input })).toBe(7);
    expect(run("[1, 2, 3].sum()")).toBe(6);
    expect(run("input.items.map(i, i.n).sum()", { input })).toBe(3.5);
    expect(run("[3, 1, 2].min() + [3, 1, 2].max()")).toBe(4);
    expect(run('timestamp("2024-01-01T00:00:00Z") + duration("90m")')).toBe("2024-01-01T01:30:00.000Z");
    expect(run('timestamp("2024-01-02T00:00:00Z") - timestamp("2024-01-01T00:00:00Z") > duration("23h")')).toBe(true);
  });

  it("a missing field is an error, except inside has() and default()", () => {
    expect(fault("input.nope", { input }).message).toMatch(/No such key: nope/);
    expect(fault("input.nope", { input }).position).toBe(6);
    expect(run("has(input.nope)", { input })).toBe(false);
    expect(run("default(input.nope.deeper, 7)", { input })).toBe(7);
    expect(run("default(input.nothing, 'x')", { input })).toBe("x");
    expect(run("default(input.qty, 7)", { input })).toBe(3);
  });

  it("reads own members only", () => {
    expect(fault("input.constructor", { input }).message).toMatch(/No such key/);
  });

  it("is refused when written: syntax, types, unknown variables, limits; with the position", () => {
    const at = (s: string) => {
      try {
        compile(s, "step");
      } catch (err) {
        return err as ExpressionError;
      }
      throw new Error(`${s} compiled`);
    };
    expect(at("input.a +").position).toBe(9);
    expect(at('1 + "a"').message).toMatch(/no such overload/);
    expect(at("event.data").message).toMatch(/Unknown variable: event/);
    expect(at("x".repeat(2001)).message).toMatch(/at most 2000/);
    expect(at("input.l.map(x, x").position).toBe(16);
    expect(() => compile("event.data.amount >= 500", "event")).not.toThrow();
  });

  it("knows what an expression reads", () => {
    expect([...compile("steps.a.output.x + steps.b.status", "step").reads.steps!]).toEqual(["a", "b"]);
    expect(compile('steps["a"].output', "step").reads.steps).toBeNull();
    expect([...compile("input.a", "step").reads.roots]).toEqual(["input"]);
  });
});
