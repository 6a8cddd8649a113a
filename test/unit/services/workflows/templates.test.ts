import { eventDataFault, newRun } from "../../../../services/workflows/runs.logic";
import { render, scopeOf, type TemplateScope } from "../../../../services/workflows/templates";
import type { WorkflowDoc } from "../../../../services/workflows/workflows.logic";
import { MAX_JSON_DEPTH } from "../../../../shared/api/json-limits";

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

  it("{{run.id}}, {{run.attempt}} (the current step's attempt, from 1) and {{workflow.id}}; secrets only when given", () => {
    const workflow = { id: "wf_1", org_id: "org_1", environment: "live", version: 1, steps: [{ id: "a", type: "delay", duration_ms: 1 }] };
    const run = newRun(workflow as WorkflowDoc, {}, { type: "manual" }, 0);
    expect(render("{{run.id}}/{{run.attempt}}/{{workflow.id}}", scopeOf(run))).toBe(`${run.id}/1/wf_1`);
    run.steps[0].attempt_count = 2;
    expect(render("{{run.attempt}}", scopeOf(run))).toBe(3);
    expect(render("Bearer {{secrets.T}}", scopeOf(run))).toBe("Bearer ");
    expect(render("Bearer {{secrets.T}}", scopeOf(run, { T: "tok" }))).toBe("Bearer tok");
  });

  it("reads own members only", () => {
    expect(render("{{input.constructor}}", scope)).toBeNull();
  });
});

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
