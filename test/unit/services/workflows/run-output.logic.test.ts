import { runOutput } from "../../../../services/workflows/run-output.logic";
import type { RunDoc } from "../../../../services/workflows/run-doc";
import { newRun } from "../../../../services/workflows/runs.logic";
import type { Step } from "../../../../services/workflows/workflows.logic";
import { T0, workflow } from "./run-fixtures";

const STEPS: Step[] = [
  { id: "a", type: "set", output: { n: 1 } },
  { id: "b", type: "set", output: 2 },
];
function ran(output?: unknown, statuses = ["succeeded", "succeeded"]): RunDoc {
  const run = newRun({ ...workflow(STEPS), ...(output !== undefined && { output }) }, { q: 3 }, { type: "manual" }, T0);
  return {
    ...run,
    cursor: 2,
    steps: run.steps.map((s, i) => ({ ...s, status: statuses[i] as "succeeded", output: i === 0 ? { n: 1 } : 2 })),
  };
}

describe("a run's output", () => {
  it("is its workflow's output filled over every step and the input", () => {
    expect(runOutput(ran({ sum: "{{ steps.a.output.n + steps.b.output + input.q }}", b: "{{ steps.b.status }}" }))).toEqual({
      output: { sum: 6, b: "succeeded" },
    });
  });

  it("is the last succeeded step's output without one", () => {
    expect(runOutput(ran())).toEqual({ output: 2 });
    expect(runOutput(ran(undefined, ["succeeded", "skipped"]))).toEqual({ output: { n: 1 } });
    expect(runOutput(ran(undefined, ["skipped", "skipped"]))).toEqual({ output: null });
  });

  it("is an error naming the output when a template cannot be filled", () => {
    const result = runOutput(ran({ x: "{{ input.missing + 1 }}" }));
    expect(result).toEqual({ error: { code: "template_error", message: expect.stringMatching(/^the workflow's output: /) } });
  });

  it("is bounded as a step's output is", () => {
    const huge = ran({ x: "{{ input.big }}" });
    huge.input = { big: "z".repeat(70 * 1024) };
    expect(runOutput(huge)).toEqual({ output: expect.objectContaining({ truncated: true }) });
  });
});
