import { compile, evaluate, ExpressionError, toCel, type Compiled } from "./expressions/cel";
import { checkReadable, TemplateError } from "./outputs";
import type { RunDoc } from "./run-doc";

/**
 * Templates in a step's fields. `{{ … }}` holds a CEL expression (expressions/cel.ts) over
 * `input`, `steps.<id>` (`output`, `status`, `error`), `run` and `workflow`. The path forms that
 * came before CEL keep their meaning exactly (a missing value is null, or nothing inside text):
 * `{{input.…}}`, `{{steps.<id>.output.…}}` (numeric and hyphenated segments too), `{{run.id}}`,
 * `{{run.attempt}}` (the current step's attempt, from 1), `{{workflow.id}}`, and `{{secrets.NAME}}`
 * (http steps only), a secret's value put in by the engine just before the request leaves and
 * never stored.
 */
export const TEMPLATE = /\{\{(.*?)\}\}/g;
export const PATH_REFERENCE = /^\s*(?:input|steps\.([a-z][a-z0-9_]*)\.output)((?:\.[A-Za-z0-9_-]+)*)\s*$/;
export const RUN_REFERENCE = /^\s*(?:run\.(?:id|attempt)|workflow\.id)\s*$/;
export const SECRET_REFERENCE = /^\s*secrets\.([A-Za-z][A-Za-z0-9_]{0,63})\s*$/;

/** One of the path forms that came before CEL, read as they always were. */
export const isPathForm = (inner: string): boolean =>
  PATH_REFERENCE.test(inner) || RUN_REFERENCE.test(inner) || SECRET_REFERENCE.test(inner);

export interface StepState {
  output: unknown;
  status: string;
  error: { code: string; message: string } | null;
}

export interface TemplateScope {
  input: unknown;
  /** The steps that succeeded, as the path forms read them. */
  steps: Record<string, { output: unknown }>;
  /** Every step before the current one, as expressions read them (absent: the succeeded ones). */
  states?: Record<string, StepState>;
  run?: { id: string; attempt: number; created_at?: string };
  workflow?: { id: string; version?: number };
  secrets?: Record<string, string>;
}

/** How many times a step was tried: runs stored before the rename counted them in `attempts`. */
export const attemptCountOf = (step: Omit<RunDoc["steps"][number], "attempts"> & { attempts?: unknown }): number =>
  step.attempt_count ?? (typeof step.attempts === "number" ? step.attempts : 0);

export const errorOf = (s: RunDoc["steps"][number]): StepState["error"] =>
  s.error === null ? null : { code: s.error_code ?? "step_failed", message: s.error };

export function scopeOf(run: RunDoc, secrets: Record<string, string> = {}): TemplateScope {
  const steps: TemplateScope["steps"] = {};
  const states: Record<string, StepState> = {};
  for (const [i, s] of run.steps.entries()) {
    if (s.status === "succeeded") steps[s.id] = { output: s.output };
    if (i < run.cursor) states[s.id] = { output: s.output, status: s.status, error: errorOf(s) };
  }
  const step = run.steps[run.cursor];
  const attempt = (step ? attemptCountOf(step) : 0) + 1;
  return {
    input: run.input,
    steps,
    states,
    run: { id: run.id, attempt, created_at: run.created_at },
    workflow: { id: run.workflow_id, version: run.workflow_version },
    secrets,
  };
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

/** The input as CEL sees it, converted once per scope. */
const celInputs = new WeakMap<TemplateScope, unknown>();

/** The variables `compiled` reads, as CEL sees them (only those: converting costs). */
export function variablesOf(scope: TemplateScope, compiled: Compiled): Record<string, unknown> {
  const { roots, steps } = compiled.reads;
  const vars: Record<string, unknown> = {};
  if (roots.has("input")) {
    if (!celInputs.has(scope)) celInputs.set(scope, toCel(scope.input));
    vars.input = celInputs.get(scope);
  }
  if (roots.has("steps")) {
    const states: Record<string, StepState> =
      scope.states ??
      Object.fromEntries(Object.entries(scope.steps).map(([id, s]) => [id, { output: s.output, status: "succeeded", error: null }]));
    const picked: Record<string, unknown> = {};
    for (const id of steps ?? Object.keys(states)) if (Object.hasOwn(states, id)) picked[id] = toCel(states[id]);
    vars.steps = picked;
  }
  if (roots.has("run")) vars.run = toCel(scope.run ?? {});
  if (roots.has("workflow")) vars.workflow = toCel(scope.workflow ?? {});
  return vars;
}

/** The value of expression `inner` (CEL, or a path form); TemplateError when it cannot be had. */
function valueOf(inner: string, scope: TemplateScope): unknown {
  if (isPathForm(inner)) return lookup(scope, inner);
  try {
    const compiled = compile(inner, "step");
    return evaluate(compiled, variablesOf(scope, compiled));
  } catch (err) {
    if (!(err instanceof ExpressionError)) throw err;
    throw new TemplateError(`{{${inner}}}: ${err.message} (at character ${err.position + 1} of the expression)`);
  }
}

/** The expression of a string that is one template alone (its first `{{…}}` is all of it), or null. */
const FIRST = /^\{\{(.*?)\}\}/;
export function wholeTemplate(value: string): string | null {
  const first = FIRST.exec(value);
  return first && first[0].length === value.length ? first[1] : null;
}

/**
 * Fills every `{{ … }}` in every string of `value`. A string that is one template alone takes the
 * value itself (a number stays a number); inside text, values are written as text (objects as
 * JSON) and null or a missing path as nothing.
 */
export function render(value: unknown, scope: TemplateScope): unknown {
  if (typeof value === "string") {
    if (!value.includes("{{")) return value;
    const whole = wholeTemplate(value);
    if (whole !== null) return valueOf(whole, scope) ?? null;
    return value.replace(TEMPLATE, (_m, expression: string) => {
      const found = valueOf(expression, scope);
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

/** A step's `if` (CEL, braces optional): true or false, or TemplateError. */
export function condition(source: string, scope: TemplateScope): boolean {
  const inner = wholeTemplate(source.trim()) ?? source;
  const value = valueOf(inner, scope);
  if (typeof value !== "boolean")
    throw new TemplateError(`if: '${inner.trim()}' must give true or false; it gave ${value === null ? "null" : JSON.stringify(value)}`);
  return value;
}
