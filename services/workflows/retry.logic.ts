import { formatPath } from "../../shared/api/json-limits";
import type { HttpStep, RetryPolicy } from "../../shared/api/wire";

/**
 * When an http step's failed attempt is tried again (docs/workflows/language.md). `retries: N` is
 * the short form of a policy of N + 1 attempts with the platform's back-off (doubling from
 * WORKFLOW_RETRY_BASE_MS, at most a minute). A 4xx other than 408 and 429 is not retried unless the
 * policy's `on` names "4xx": the request itself is wrong, and sending it again changes nothing.
 */
export const RETRY_ON = ["timeout", "network", "5xx", "429", "408", "4xx"] as const;
export type FailureKind = (typeof RETRY_ON)[number];
export const DEFAULT_RETRY_ON: readonly FailureKind[] = ["timeout", "network", "5xx", "429", "408"];
export const MAX_ATTEMPTS = 20;
export const RETRY_INTERVAL_MAX_MS = 3_600_000;
/** The attempts a step keeps (the newest): each says why it failed, so a retry does not erase it. */
export const ATTEMPTS_KEPT = 10;

/** What the engine saw of an attempt that did not succeed. */
export interface AttemptFacts {
  status_code?: number;
  timed_out?: boolean;
  /** The answer's Retry-After header as sent. */
  retry_after?: string;
}

export function kindOf(facts: AttemptFacts): FailureKind {
  const status = facts.status_code;
  if (status === undefined) return facts.timed_out ? "timeout" : "network";
  if (status === 408) return "408";
  if (status === 429) return "429";
  if (status >= 400 && status < 500) return "4xx";
  // A 2xx whose answer could not be kept, a 3xx, a 5xx: the server's side.
  return "5xx";
}

/** Wait before retry `attempt` (1-based) of an http step in the short form: base, doubled each time, at most a minute. */
export const retryDelay = (baseMs: number, attempt: number): number => Math.min(60_000, baseMs * 2 ** (attempt - 1));

/** The policy a step runs under: its own, or the one `retries` stands for. */
export const policyOf = (step: Pick<HttpStep, "retries" | "retry">, retryBaseMs: number): RetryPolicy =>
  step.retry ?? {
    max_attempts: step.retries + 1,
    initial_interval_ms: retryBaseMs,
    backoff_rate: 2,
    max_interval_ms: 60_000,
    jitter: "none",
    on: [...DEFAULT_RETRY_ON],
  };

/** Milliseconds a Retry-After header asks for (seconds, or an HTTP date), or null. */
export function retryAfterMs(header: string | undefined, nowMs: number): number | null {
  if (header === undefined) return null;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/**
 * After attempt `attempt` (1-based) failed: the wait before the next one, or null when it is not
 * retried (out of attempts, or a kind of failure the policy does not retry).
 */
export function nextRetry(policy: RetryPolicy, attempt: number, facts: AttemptFacts, nowMs: number, random = Math.random): number | null {
  if (attempt >= policy.max_attempts) return null;
  const kind = kindOf(facts);
  const on = policy.on as readonly string[];
  if (!on.includes(kind) && !(on.includes("4xx") && (kind === "408" || kind === "429"))) return null;
  const backoff = Math.min(policy.max_interval_ms, policy.initial_interval_ms * policy.backoff_rate ** (attempt - 1));
  const wait = policy.jitter === "full" ? Math.floor(random() * backoff) : Math.round(backoff);
  const asked = retryAfterMs(facts.retry_after, nowMs);
  // The server's wish, within the policy's longest wait.
  return asked === null ? wait : Math.max(wait, Math.min(asked, policy.max_interval_ms));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A step's `retry`, checked; a message naming the field (`retry.max_attempts`) when it is wrong. */
export function checkRetry(raw: unknown, fail: (field: string, message: string) => Error): RetryPolicy {
  if (!isObject(raw))
    throw fail("retry", "retry must be an object: {max_attempts, initial_interval_ms, backoff_rate, max_interval_ms, jitter, on}");
  const known = ["max_attempts", "initial_interval_ms", "backoff_rate", "max_interval_ms", "jitter", "on"];
  const extra = Object.keys(raw).find((k) => !known.includes(k));
  if (extra !== undefined)
    throw fail(formatPath([extra], "retry"), `retry has no field ${JSON.stringify(extra)} (it takes ${known.join(", ")})`);
  const int = (field: string, min: number, max: number, fallback: number): number => {
    const v = raw[field] ?? fallback;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)
      throw fail(`retry.${field}`, `retry.${field} must be a whole number from ${min} to ${max}`);
    return v;
  };
  const max_attempts = int("max_attempts", 1, MAX_ATTEMPTS, 3);
  const initial_interval_ms = int("initial_interval_ms", 1, RETRY_INTERVAL_MAX_MS, 1000);
  const max_interval_ms = int("max_interval_ms", 1, RETRY_INTERVAL_MAX_MS, 60_000);
  const backoff_rate = raw.backoff_rate ?? 2;
  if (typeof backoff_rate !== "number" || backoff_rate < 1 || backoff_rate > 10)
    throw fail("retry.backoff_rate", "retry.backoff_rate must be a number from 1 to 10");
  const jitter = raw.jitter ?? "full";
  if (jitter !== "full" && jitter !== "none") throw fail("retry.jitter", `retry.jitter must be "full" or "none"`);
  const on = raw.on ?? [...DEFAULT_RETRY_ON];
  if (!Array.isArray(on) || on.some((k) => !(RETRY_ON as readonly unknown[]).includes(k)))
    throw fail("retry.on", `retry.on must be a list of kinds from ${RETRY_ON.map((k) => JSON.stringify(k)).join(", ")}`);
  return { max_attempts, initial_interval_ms, backoff_rate, max_interval_ms, jitter, on: [...new Set(on)] as RetryPolicy["on"] };
}
