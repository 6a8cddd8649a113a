import { compile, evaluate, ExpressionError, MAX_EVALUATION_STEPS, toCel } from "../../../../services/workflows/expressions/cel";
import { inputs, worst } from "../../../../bench/expression-cases";

/**
 * The worst expressions the validator lets through, on the largest input (64 KiB of JSON), either
 * evaluate or fail clearly, within the evaluation's step budget: a bound that does not depend on
 * the machine. Their CPU time is measured by bench/expressions.ts (docs/benchmarks.md).
 */
describe(`an expression's cost`, () => {
  it.each(worst)("evaluates on a 64 KiB input or fails clearly, within the step budget: %s", (source, which) => {
    const compiled = compile(source, "step");
    const vars = { input: toCel(inputs[which]) };
    let outcome = "evaluated";
    try {
      evaluate(compiled, vars);
    } catch (err) {
      expect(err).toBeInstanceOf(ExpressionError);
      outcome = (err as Error).message;
    }
    expect(outcome === "evaluated" || outcome.length > 10).toBe(true);
  });

  it(`stops an evaluation after ${MAX_EVALUATION_STEPS} steps, saying why`, () => {
    const compiled = compile("input.l.map(x, x + 1).size()", "step");
    expect(() => evaluate(compiled, { input: toCel(inputs.zeros) })).toThrow(/over 5000 evaluation steps/);
  });

  it("refuses matches(), whose regular expression could take unbounded time", () => {
    expect(() => compile('input.s.matches("(a+)+$")', "step")).toThrow(/matches\(\) is not available/);
  });
});
