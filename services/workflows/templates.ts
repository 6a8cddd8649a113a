import { checkReadable } from "./outputs";
import type { RunDoc } from "./run-doc";

/**
 * Templates in a step's fields: `{{input.…}}` reads the run's input, `{{steps.<id>.output.…}}` the
 * output of an earlier step that succeeded, `{{run.id}}`, `{{run.attempt}}` (the current step's
 * attempt, from 1) and `{{workflow.id}}` the run, and `{{secrets.NAME}}` (http steps only) a secret's
 * value, put in by the engine just before the request leaves and never stored.
 */
const TEMPLATE = /\{\{(.*?)\}\}/g;
const WHOLE = /^\{\{([^{}]*)\}\}$/;

export interface TemplateScope {
  input: unknown;
  steps: Record<string, { output: unknown }>;
  run?: { id: string; attempt: number };
  workflow?: { id: string };
  secrets?: Record<string, string>;
}

/** How many times a step was tried: runs stored before the rename counted them in `attempts`. */
export const attemptCountOf = (step: RunDoc["steps"][number] & { attempts?: number }): number => step.attempt_count ?? step.attempts ?? 0;

export function scopeOf(run: RunDoc, secrets: Record<string, string> = {}): TemplateScope {
  const steps: TemplateScope["steps"] = {};
  for (const s of run.steps) if (s.status === "succeeded") steps[s.id] = { output: s.output };
  const step = run.steps[run.cursor];
  const attempt = (step ? attemptCountOf(step) : 0) + 1;
  return { input: run.input, steps, run: { id: run.id, attempt }, workflow: { id: run.workflow_id }, secrets };
}

/** The value at a dotted path: own members only (`{{input.constructor}}` is a key of the input or nothing). */
function lookup(scope: TemplateScope, expression: string): unknown {
  let value: unknown = scope;
  const parts = expression.trim().split(".");
  for (const [i, part] of parts.entries()) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
    // A truncated output (outputs.ts) cannot be read into: throws TemplateError.
    if (i === 2 && parts[0] === "steps") checkReadable(value, parts[1], parts.slice(3), expression);
  }
  return value;
}

/**
 * Fills `{{input.…}}` and `{{steps.<id>.output.…}}` in every string of `value`. A string that is one
 * template alone takes the value itself (a number stays a number); inside text, values are written
 * as text (objects as JSON) and a missing value as nothing.
 */
export function render(value: unknown, scope: TemplateScope): unknown {
  if (typeof value === "string") {
    const whole = WHOLE.exec(value);
    if (whole) return lookup(scope, whole[1]) ?? null;
    return value.replace(TEMPLATE, (_m, expression: string) => {
      const found = lookup(scope, expression);
      if (found === undefined || found === null) return "";
      return typeof found === "string" ? found : JSON.stringify(found);
    });
  }
  if (Array.isArray(value)) return value.map((v) => render(v, scope));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, render(v, scope)]));
  }
  return value;
}
