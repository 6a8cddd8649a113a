import { render } from "../../../../services/workflows/templates";

describe("templates", () => {
  const scope = { input: { order: { id: "o1", qty: 3, tags: ["a"] } }, steps: { fetch: { output: { body: { ref: "R-1", n: null } } } } };

  it("a whole-string template keeps the value's type; inside text values become text", () => {
    expect(render("{{input.order.qty}}", scope)).toBe(3);
    expect(render("{{ input.order.tags }}", scope)).toEqual(["a"]);
    expect(render("qty={{input.order.qty}} tags={{input.order.tags}}", scope)).toBe('qty=3 tags=["a"]');
    expect(render("/orders/{{input.order.id}}/{{steps.fetch.output.body.ref}}", scope)).toBe("/orders/o1/R-1");
  });

  it("a missing value is null alone and nothing inside text", () => {
    expect(render("{{input.nope.deeper}}", scope)).toBeNull();
    expect(render("x{{steps.other.output.id}}y{{steps.fetch.output.body.n}}z", scope)).toBe("xyz");
  });

  it("fills nested objects and lists, and leaves other values alone", () => {
    expect(render({ a: ["{{input.order.id}}", 1, true, null], b: { c: "{{input.order.qty}}" } }, scope)).toEqual({
      a: ["o1", 1, true, null],
      b: { c: 3 },
    });
  });

  it("reads own members only", () => {
    expect(render("{{input.constructor}}", scope)).toBeNull();
  });
});
