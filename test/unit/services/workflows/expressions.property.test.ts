import fc from "fast-check";
import { compile, ExpressionError } from "../../../../services/workflows/expressions/cel";
import { TemplateError } from "../../../../services/workflows/outputs";
import { render, type TemplateScope } from "../../../../services/workflows/templates";
import { expression } from "../../../helpers/cel-arbitraries";

/**
 * Generated expressions over generated inputs: each is refused when written (ExpressionError), or
 * renders to a JSON value, or fails the step with a TemplateError naming it. Nothing else: no other
 * exception (a 5xx), no value JSON cannot hold, no stall (the cost bound is expression-cost.test.ts).
 */
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
            // JSON through and through: its text reads back as the same text (-0 is written 0, as JSON has it).
            const text = JSON.stringify(value ?? null);
            expect(typeof text).toBe("string");
            expect(JSON.stringify(JSON.parse(text))).toBe(text);
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
