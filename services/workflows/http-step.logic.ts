import { boundedOutput, outputsBytes } from "./outputs";
import { attemptCountOf, render, scopeOf } from "./templates";
import { ATTEMPTS_KEPT, nextRetry, policyOf, type AttemptFacts } from "./retry.logic";
import type { RunDoc } from "./run-doc";
import { iso, put, written, type Clock, type RunWrite } from "./run-write.logic";
import { advance, fail } from "./runs.logic";
import type { HttpStep } from "./workflows.logic";
import type { StepAttempt } from "../../shared/api/wire";

/** One attempt of an http step, as the engine made it: the facts a retry policy decides on, and how long it took. */
export interface Attempt extends AttemptFacts {
  ok: boolean;
  output: unknown;
  error: string | null;
  ms?: number;
}

/**
 * An attempt of the current http step ended: advance, retry (due after the policy's wait) while
 * the policy retries it, or fail. The attempt joins the step's newest ATTEMPTS_KEPT.
 */
export function attempted(run: RunDoc, result: Attempt, c: Clock, retryBaseMs: number, random = Math.random): RunWrite {
  const step = run.definition[run.cursor] as HttpStep;
  const state = run.steps[run.cursor];
  // Within the step's and the run's bounds on stored outputs (see outputs.ts).
  const output = boundedOutput(result.output, outputsBytes(run.steps, run.cursor));
  const attempt_count = attemptCountOf(state) + 1;
  const record: StepAttempt = {
    attempt: attempt_count,
    started_at: iso(c.now - (result.ms ?? 0)),
    finished_at: iso(c.now),
    ...(result.status_code !== undefined && { status_code: result.status_code }),
    error: result.error === null ? null : result.error.slice(0, 500),
  };
  const attempts = [...(Array.isArray(state.attempts) ? state.attempts : []), record].slice(-ATTEMPTS_KEPT);
  if (result.ok) return advance(run, { output, error: null, attempt_count, attempts }, c);
  const wait = nextRetry(policyOf(step, retryBaseMs), attempt_count, result, c.now, random);
  if (wait === null) return fail(run, result.error ?? "failed", c, { output, attempt_count, attempts });
  return written(
    run,
    { steps: put(run, { output, error: result.error, attempt_count, attempts }) },
    { kind: "due", at: c.now + wait },
    c.now,
    true,
  );
}

/** An http step's request, its fields filled from the run's input and earlier outputs. */
export interface HttpRequest {
  url: string;
  method: HttpStep["method"];
  headers: Record<string, string>;
  body: string | undefined;
  timeoutMs: number;
}

export function requestOf(step: HttpStep, run: RunDoc, secrets: Record<string, string>): HttpRequest {
  const scope = scopeOf(run, secrets);
  const url = String(render(step.url, scope));
  const headers = render(step.headers, scope) as Record<string, string>;
  const rendered = step.body === null ? undefined : render(step.body, scope);
  const body = rendered === undefined || rendered === null ? undefined : typeof rendered === "string" ? rendered : JSON.stringify(rendered);
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
  if (body !== undefined && !lower["content-type"])
    lower["content-type"] = typeof rendered === "string" ? "text/plain" : "application/json";
  lower["user-agent"] ??= "wfp-workflows/1";
  return { url, method: step.method, headers: lower, body, timeoutMs: step.timeout_ms };
}
