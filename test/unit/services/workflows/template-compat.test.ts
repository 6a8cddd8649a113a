import fc from "fast-check";
import { checkReadable } from "../../../../services/workflows/outputs";
import { render, type TemplateScope } from "../../../../services/workflows/templates";

/**
 * Every template form valid before CEL renders exactly as it did. The reference is the renderer
 * as it was (below, verbatim), run over a corpus and over generated scopes and templates.
 */
const LEGACY_TEMPLATE = /\{\{(.*?)\}\}/g;
const LEGACY_WHOLE = /^\{\{([^{}]*)\}\}$/;
function legacyLookup(scope: TemplateScope, expression: string): unknown {
  let value: unknown = scope;
  const parts = expression.trim().split(".");
  for (const [i, part] of parts.entries()) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
    if (i === 2 && parts[0] === "steps") checkReadable(value, parts[1], parts.slice(3), expression);
  }
  return value;
}
function legacyRender(value: unknown, scope: TemplateScope): unknown {
  if (typeof value === "string") {
    const whole = LEGACY_WHOLE.exec(value);
    if (whole) return legacyLookup(scope, whole[1]) ?? null;
    return value.replace(LEGACY_TEMPLATE, (_m, expression: string) => {
      const found = legacyLookup(scope, expression);
      if (found === undefined || found === null) return "";
      return typeof found === "string" ? found : JSON.stringify(found);
    });
  }
  if (Array.isArray(value)) return value.map((v) => legacyRender(v, scope));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, legacyRender(v, scope)]));
  }
  return value;
}

const scope: TemplateScope = {
  input: { a: { b: [10, { "x-y": "hy" }], "0": "zero" }, n: 3.5, s: "text", nothing: null, list: [1, 2], "with-dash": true },
  steps: { fetch: { output: { status_code: 200, body: { items: [{ id: "i1" }], "ref-no": "R-1" } } }, other: { output: null } },
  states: { fetch: { output: {}, status: "succeeded", error: null }, failed: { output: null, status: "failed", error: null } },
  run: { id: "run_1", attempt: 2, created_at: "2024-01-01T00:00:00.000Z" },
  workflow: { id: "wf_1", version: 4 },
  secrets: { TOKEN: "tok" },
};

const CORPUS = [
  "{{input}}",
  "{{input.a}}",
  "{{ input.a.b }}",
  "{{input.a.b.0}}",
  "{{input.a.b.1.x-y}}",
  "{{input.a.0}}",
  "{{input.n}}",
  "{{input.nothing}}",
  "{{input.missing}}",
  "{{input.missing.deeper}}",
  "{{input.list.length}}",
  "{{input.with-dash}}",
  "{{input.constructor}}",
  "{{input.__proto__}}",
  "{{steps.fetch.output}}",
  "{{steps.fetch.output.status_code}}",
  "{{steps.fetch.output.body.items.0.id}}",
  "{{steps.fetch.output.body.ref-no}}",
  "{{steps.other.output}}",
  "{{steps.other.output.x}}",
  "{{steps.failed.output}}",
  "{{run.id}}",
  "{{run.attempt}}",
  "{{workflow.id}}",
  "{{secrets.TOKEN}}",
  "{{secrets.NOPE}}",
  "Bearer {{secrets.TOKEN}}",
  "/orders/{{input.a.b.0}}/{{steps.fetch.output.body.ref-no}}?n={{input.n}}&x={{input.missing}}",
  "{{input.a}} and {{input.list}} and {{input.nothing}}",
  "{{input.s}}{{input.n}}",
  "{{input.s}}}",
  "plain text, no template",
  "{ not a template }",
  "{{run.id}}-{{run.attempt}}-{{workflow.id}}",
];

describe("template forms valid before CEL", () => {
  it.each(CORPUS)("%s renders as before", (template) => {
    expect(render(template, scope)).toEqual(legacyRender(template, scope));
  });

  it("objects and lists of templates render as before", () => {
    const value = { url: CORPUS[27], headers: { a: CORPUS[26] }, body: [CORPUS[3], { deep: CORPUS[16] }, 1, true, null] };
    expect(render(value, scope)).toEqual(legacyRender(value, scope));
  });

  it("generated inputs and path templates render as before", () => {
    const segment = fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{1,6}$/), fc.nat({ max: 3 }).map(String));
    const path = fc.tuple(
      fc.constantFrom("input", "steps.fetch.output", "steps.other.output", "steps.gone.output"),
      fc.array(segment, { maxLength: 4 }),
    );
    const template = path.map(([root, parts]) => `{{${[root, ...parts].join(".")}}}`);
    const text = fc
      .array(fc.oneof(template, fc.stringMatching(/^[a-z /?=&-]{0,8}$/)), { minLength: 1, maxLength: 4 })
      .map((p) => p.join(""));
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.jsonValue({ maxDepth: 4 }), text, (input, output, t) => {
        const s: TemplateScope = { ...scope, input, steps: { ...scope.steps, fetch: { output } } };
        expect(render(t, s)).toEqual(legacyRender(t, s));
      }),
      { numRuns: 500 },
    );
  });
});
