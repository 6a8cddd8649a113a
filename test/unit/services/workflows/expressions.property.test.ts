import fc from "fast-check";
import { compile, ExpressionError } from "../../../../services/workflows/expressions/cel";
import { TemplateError } from "../../../../services/workflows/outputs";
import { render, type TemplateScope } from "../../../../services/workflows/templates";

/**
 * Generated expressions over generated inputs: each is refused when written (ExpressionError), or
 * renders to a JSON value, or fails the step with a TemplateError naming it. Nothing else: no other
 * exception (a 5xx), no value JSON cannot hold, no stall (the cost bound is expression-cost.test.ts).
 */
const path = fc
  .array(fc.constantFrom("a", "b", "n", "s", "list", "items", "0", "x"), { minLength: 1, maxLength: 3 })
  .map((p) => `input.${p.filter((s) => !/^\d/.test(s)).join(".") || "a"}`);
const literal = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }).map(String),
  fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((d) => (Number.isInteger(d) ? `${d}.0` : String(d))),
  fc.constantFrom('"abc"', '""', "true", "false", "null", "[1, 2.5, 3]", '{"k": 1}', '["x", "y"]'),
);
const expression: fc.Arbitrary<string> = fc.letrec<{ e: string }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    literal,
    path,
    fc
      .tuple(tie("e"), fc.constantFrom("+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "in"), tie("e"))
      .map(([a, op, b]) => `(${a} ${op} ${b})`),
    fc.tuple(fc.constantFrom("size", "string", "int", "double", "has", "!"), path).map(([f, a]) => (f === "!" ? `!${a}` : `${f}(${a})`)),
    fc
      .tuple(
        tie("e"),
        fc.constantFrom("lower()", "upper()", "trim()", "sum()", "min()", "max()", "size()", 'split(",")', 'join("-")', 'contains("a")'),
      )
      .map(([a, m]) => `${a}.${m}`),
    fc.tuple(path, tie("e")).map(([p, d]) => `default(${p}, ${d})`),
    fc.tuple(tie("e"), tie("e"), tie("e")).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
    fc
      .tuple(fc.constantFrom("map", "filter", "all", "exists"), tie("e"))
      .map(([m, body]) => `input.list.${m}(v, ${body.replaceAll("input.a", "v")})`),
  ),
})).e;

describe("generated expressions over generated inputs", () => {
  it("are refused when written, or evaluate to JSON, or fail the step clearly", () => {
    fc.assert(
      fc.property(
        expression,
        fc.jsonValue({ maxDepth: 3 }),
        fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 20 }),
        (source, a, list) => {
          try {
            compile(source, "step");
          } catch (err) {
            expect(err).toBeInstanceOf(ExpressionError);
            expect((err as ExpressionError).position).toBeGreaterThanOrEqual(0);
            return;
          }
          const scope: TemplateScope = { input: { a, n: 2, s: "a,b", list, items: [{ x: 1 }] }, steps: {} };
          try {
            const value = render(`{{ ${source} }}`, scope);
            expect(JSON.parse(JSON.stringify(value ?? null))).toEqual(value ?? null);
          } catch (err) {
            expect(err).toBeInstanceOf(TemplateError);
            expect((err as Error).message).toContain(source);
          }
        },
      ),
      { numRuns: 1500 },
    );
  });
});
