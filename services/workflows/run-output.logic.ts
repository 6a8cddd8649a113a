import { boundedOutput, outputsBytes, TemplateError } from "./outputs";
import type { RunDoc } from "./run-doc";
import { render, scopeOf } from "./templates";

/**
 * A run's `output` once it succeeds: its workflow's `output` templates filled over every step (the
 * steps' outputs, statuses and errors, as a step after the last would see them), else the output of
 * its last succeeded step; bounded as a step's output is (outputs.ts). A template that cannot be
 * filled (a missing value) gives the error the run then fails with.
 */
export function runOutput(run: RunDoc): { output: unknown } | { error: { code: string; message: string } } {
  const others = outputsBytes(run.steps, -1);
  if (run.output_template === undefined) {
    const last = run.steps.findLast((s) => s.status === "succeeded");
    return { output: boundedOutput(last?.output ?? null, others) };
  }
  try {
    const value = render(run.output_template, scopeOf({ ...run, cursor: run.steps.length }));
    return { output: boundedOutput(value ?? null, others) };
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    return { error: { code: "template_error", message: `the workflow's output: ${err.message}` } };
  }
}
