import {
  ALWAYS_KEPT_BYTES,
  boundedOutput,
  cutAnswer,
  isTruncated,
  jsonBytes,
  outputsBytes,
  PREVIEW_MAX_BYTES,
  previewOf,
  redact,
  redactAnswer,
  RUN_OUTPUTS_MAX_BYTES,
  STEP_OUTPUT_MAX_BYTES,
  TemplateError,
} from "../../../../services/workflows/outputs";
import type { RunStep } from "../../../../shared/api/wire";
import { render } from "../../../../services/workflows/templates";

describe("bounded outputs", () => {
  const big = { status_code: 200, body: { pad: "x".repeat(STEP_OUTPUT_MAX_BYTES) } };

  it("keeps an output within the step's bound while the run has room", () => {
    const output = { status_code: 200, body: { pad: "x".repeat(STEP_OUTPUT_MAX_BYTES - 100) } };
    expect(boundedOutput(output, 0)).toBe(output);
    expect(boundedOutput(output, RUN_OUTPUTS_MAX_BYTES - jsonBytes(output))).toBe(output);
  });

  it("stores a marker for an output over the step's bound, keeping an http answer's status code", () => {
    const marker = boundedOutput(big, 0);
    expect(marker).toEqual({ status_code: 200, truncated: true, size: jsonBytes(big.body), preview: expect.any(String) });
    expect(isTruncated(marker)).toBe(true);
    const { preview } = marker as { preview: string };
    expect(JSON.stringify(big.body).startsWith(preview)).toBe(true);
    expect(preview.length).toBeGreaterThan(PREVIEW_MAX_BYTES - 10);
    expect(jsonBytes(marker)).toBeLessThan(ALWAYS_KEPT_BYTES);
  });

  it("stores a marker once the run's outputs would pass their bound; small outputs are always kept", () => {
    const output = { status_code: 200, body: "y".repeat(10_000) };
    expect(isTruncated(boundedOutput(output, RUN_OUTPUTS_MAX_BYTES - 9_000))).toBe(true);
    expect(boundedOutput({ waited_ms: 5 }, RUN_OUTPUTS_MAX_BYTES)).toEqual({ waited_ms: 5 });
    // A text body is previewed as text.
    expect((boundedOutput(output, RUN_OUTPUTS_MAX_BYTES) as { preview: string }).preview).toBe("y".repeat(PREVIEW_MAX_BYTES));
  });

  it("an answer cut while read is a marker with the answer's whole size", () => {
    expect(cutAnswer(502, "abc", 300_000)).toEqual({ status_code: 502, truncated: true, size: 300_000, preview: "abc" });
  });

  it("counts the other steps' outputs", () => {
    const steps = [{ output: { a: 1 } }, { output: null }, { output: "zz" }] as RunStep[];
    expect(outputsBytes(steps, 2)).toBe(jsonBytes({ a: 1 }));
  });

  it("previews stay within their bound as JSON and never end in half a surrogate pair", () => {
    const escaped = previewOf("\u0001".repeat(5000));
    expect(jsonBytes(escaped) - 2).toBeLessThanOrEqual(PREVIEW_MAX_BYTES);
    expect(jsonBytes(escaped) - 2).toBeGreaterThan(PREVIEW_MAX_BYTES - 6);
    const pairs = previewOf("😀".repeat(2000));
    expect(pairs.length % 2).toBe(0);
    expect(jsonBytes(pairs) - 2).toBe(PREVIEW_MAX_BYTES);
    expect(previewOf(`${"a".repeat(PREVIEW_MAX_BYTES - 3)}😀`)).toBe("a".repeat(PREVIEW_MAX_BYTES - 3));
  });

  it("a template reading into a truncated output fails clearly; the marker's own fields can be read", () => {
    const scope = { input: {}, steps: { call: { output: boundedOutput(big, 0) }, ok: { output: { status_code: 200, body: { id: 7 } } } } };
    expect(() => render("{{steps.call.output.body.pad}}", scope)).toThrow(TemplateError);
    expect(() => render("id={{steps.call.output.body}}", scope)).toThrow(/steps\.call\.output\.body.*was not stored whole/);
    expect(() => render("{{steps.call.output}}", scope)).toThrow(TemplateError);
    expect(
      render(
        { code: "{{steps.call.output.status_code}}", cut: "{{steps.call.output.truncated}}", size: "{{steps.call.output.size}}" },
        scope,
      ),
    ).toEqual({
      code: 200,
      cut: true,
      size: jsonBytes(big.body),
    });
    expect(render("{{steps.ok.output.body.id}}", scope)).toBe(7);
    // An answer's body shaped like a marker is not one: the marker is the output itself.
    const forged = { input: {}, steps: { a: { output: { status_code: 200, body: { truncated: true, size: 1, preview: "" } } } } };
    expect(render("{{steps.a.output.body.truncated}}", forged)).toBe(true);
  });
});

describe("redact", () => {
  it("replaces every occurrence of each secret's value in strings and keys, the longer value first", () => {
    const secrets = { SHORT: "abc", LONG: "abcdef" };
    const output = { status_code: 200, body: { echo: "x abcdef y abc", list: ["abc", 1, null], abc: true } };
    expect(redact(output, secrets)).toEqual({
      status_code: 200,
      body: { echo: "x [redacted:LONG] y [redacted:SHORT]", list: ["[redacted:SHORT]", 1, null], "[redacted:SHORT]": true },
    });
    expect(redact("the server answered 500 for abc", secrets)).toBe("the server answered 500 for [redacted:SHORT]");
    expect(redact(output, {})).toBe(output);
  });

  it("redactAnswer redacts what the server sent, never the fields the engine writes", () => {
    const secrets = { S: "t" };
    expect(redactAnswer({ status_code: 200, body: { t: "at" } }, secrets)).toEqual({
      status_code: 200,
      body: { "[redacted:S]": "a[redacted:S]" },
    });
    expect(redactAnswer({ status_code: 502, truncated: true, size: 9, preview: "txt" }, secrets)).toEqual({
      status_code: 502,
      truncated: true,
      size: 9,
      preview: "[redacted:S]x[redacted:S]",
    });
    expect(redactAnswer(null, secrets)).toBeNull();
  });
});
