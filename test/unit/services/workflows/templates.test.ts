import { MAX_JSON_DEPTH } from "../../../../shared/json-limits";
import { eventDataFault, render, type TemplateScope } from "../../../../services/workflows/runs.logic";

/** `{"k":{"k":…}}` with `levels` objects, the innermost holding `inner`. */
const nestObjects = (levels: number, key = "a", inner = "1") =>
  `{"${key}":`.repeat(levels - 1) + `{"${key}":${inner}}` + "}".repeat(levels - 1);

describe("workflow templates and event data", () => {
  const deep = JSON.parse(nestObjects(MAX_JSON_DEPTH, "k", '"bottom"'));
  const scope: TemplateScope = {
    input: JSON.parse('{"a.b":1,"__proto__":2,"list":[1,2]}'),
    steps: { s: { output: { status_code: 200, body: deep } } },
  };

  it("reach deep values by path, and only the values' own members", () => {
    const path = Array(MAX_JSON_DEPTH).fill("k").join(".");
    expect(render(`{{steps.s.output.body.${path}}}`, scope)).toBe("bottom");
    expect(render(`{{steps.s.output.body.${path}.x.y.z}}`, scope)).toBeNull();
    expect(render("{{input.__proto__}}", scope)).toBe(2);
    expect(render("{{input.constructor}}", scope)).toBeNull();
    expect(render("x{{input.toString}}y{{input.list.length}}", scope)).toBe("xy2");
    expect(typeof render("{{steps.s.output}}", scope)).toBe("object");
    expect((render("text {{steps.s.output.body}}", scope) as string).length).toBeGreaterThan(MAX_JSON_DEPTH * 6);
  });

  it("keep event data within what POST /events takes", () => {
    expect(eventDataFault(render({ copy: "{{input}}" }, scope))).toBeNull();
    expect(eventDataFault(render({ answer: "{{steps.s.output.body}}" }, scope))).toMatch(
      /^the event's data, once its templates are filled, is nested deeper than 32 levels of objects and arrays \(at data\.answer(\.k)+\)$/,
    );
  });
});
