import { createHash } from "node:crypto";
import { invalidParam } from "../../shared/errors";
import { formatPath } from "../../shared/api/json-limits";
import type { FlowConcurrency, FlowDebounce, FlowThrottle } from "../../shared/api/wire";
import { checkTemplates, type Fault } from "./expressions/check";
import { render } from "./templates";
import type { RunDoc, RunFlow } from "./run-doc";
import type { RunWrite } from "./run-write.logic";

/**
 * Flow control per key (docs/workflows/README.md, "Flow control"): a workflow's `concurrency`
 * (at most `limit` runs of one key unfinished at once) and `throttle` (at most `limit` starts of one
 * key per `period_ms`). A run of such a workflow is stored held: `queued`, with no due time (the
 * engine never claims it, so it holds no engine slot), its key and the order it came in
 * (`held_at`); the gate (flow-gate.ts) lets the oldest held run of a key go when the key has room.
 */
export const CONCURRENCY_LIMIT_MAX = 1000;
export const THROTTLE_LIMIT_MAX = 10_000;
export const THROTTLE_PERIOD_MIN_MS = 100;
export const THROTTLE_PERIOD_MAX_MS = 24 * 60 * 60 * 1000;
/** A key is kept as it is up to this many characters, longer ones by their SHA-256. */
export const FLOW_KEY_MAX_CHARS = 200;
export const KEY_TEMPLATE_MAX_CHARS = 1000;

/** Why a held run waits, as the run shows it (`queued_reason`). */
export type QueuedReason = "concurrency" | "throttle" | "debounce" | "start_budget";
export const DEBOUNCE_MAX_MS = 7 * 24 * 60 * 60 * 1000;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const fault: Fault = (field, message) => invalidParam(field, `${field}: ${message}`);

function integer(field: string, raw: unknown, min: number, max: number): number {
  if (typeof raw !== "number" || !Number.isInteger(raw) || raw < min || raw > max)
    throw fault(field, `must be an integer from ${min} to ${max}`);
  return raw;
}

function keyTemplate(field: string, raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== "string" || raw.trim() === "" || raw.length > KEY_TEMPLATE_MAX_CHARS)
    throw fault(
      field,
      `must be a template over the run's input (a string of 1 to ${KEY_TEMPLATE_MAX_CHARS} characters), e.g. "{{ input.customer_id }}"`,
    );
  // Over the input only: no step has run when the key is taken.
  checkTemplates(fault, field, raw, new Set(), "key");
  return raw;
}

function checkFields(name: string, raw: Record<string, unknown>, allowed: readonly string[]): void {
  const extra = Object.keys(raw).find((k) => !allowed.includes(k));
  if (extra !== undefined)
    throw fault(formatPath([extra], name), `${name} has no field ${JSON.stringify(extra)} (it takes ${allowed.join(", ")})`);
}

/** A workflow's `concurrency`, checked; null or absent: none. */
export function checkConcurrency(raw: unknown): FlowConcurrency | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) throw fault("concurrency", 'must be an object {"limit": n, "key": "{{ … }}"}');
  checkFields("concurrency", raw, ["limit", "key"]);
  const key = keyTemplate("concurrency.key", raw.key);
  return { limit: integer("concurrency.limit", raw.limit, 1, CONCURRENCY_LIMIT_MAX), ...(key !== undefined && { key }) };
}

/** A workflow's `throttle`, checked; null or absent: none. */
export function checkThrottle(raw: unknown): FlowThrottle | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) throw fault("throttle", 'must be an object {"limit": n, "period_ms": n, "key": "{{ … }}"}');
  checkFields("throttle", raw, ["limit", "period_ms", "key"]);
  const limit = integer("throttle.limit", raw.limit, 1, THROTTLE_LIMIT_MAX);
  const period_ms = integer("throttle.period_ms", raw.period_ms, THROTTLE_PERIOD_MIN_MS, THROTTLE_PERIOD_MAX_MS);
  const key = keyTemplate("throttle.key", raw.key);
  return { limit, period_ms, ...(key !== undefined && { key }) };
}

/**
 * The key of a run: the template rendered over its input, as text. A template that cannot be
 * rendered (a field the input lacks) gives the empty key: the run is held with the others
 * that lack it, never let through unheld.
 */
export function keyOf(template: string | undefined, input: unknown): string {
  if (template === undefined) return "";
  let value: unknown;
  try {
    value = render(template, { input, steps: {} });
  } catch {
    return "";
  }
  const text = value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  return text.length <= FLOW_KEY_MAX_CHARS ? text : `sha256:${createHash("sha256").update(text).digest("hex")}`;
}

type FlowWorkflow = { id: string; concurrency?: FlowConcurrency | null; throttle?: FlowThrottle | null; debounce?: FlowDebounce | null };

/** A workflow's `debounce`, checked; null or absent: none. */
export function checkDebounce(raw: unknown): FlowDebounce | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isObject(raw)) throw fault("debounce", 'must be an object {"period_ms": n, "key": "{{ … }}", "max_wait_ms": n}');
  checkFields("debounce", raw, ["period_ms", "key", "max_wait_ms"]);
  const period_ms = integer("debounce.period_ms", raw.period_ms, THROTTLE_PERIOD_MIN_MS, DEBOUNCE_MAX_MS);
  const max_wait_ms =
    raw.max_wait_ms === undefined ? undefined : integer("debounce.max_wait_ms", raw.max_wait_ms, THROTTLE_PERIOD_MIN_MS, DEBOUNCE_MAX_MS);
  const key = keyTemplate("debounce.key", raw.key);
  return { period_ms, ...(max_wait_ms !== undefined && { max_wait_ms }), ...(key !== undefined && { key }) };
}

/**
 * A start of a debounced key while a run of it is pending: the pending run takes the start's input,
 * and goes `period_ms` after this start, or at its deadline (its first start plus `max_wait_ms`)
 * if that comes first.
 */
export function debounced(pending: RunDoc, input: Record<string, unknown>, periodMs: number, nowMs: number) {
  const releaseAt = Math.min(nowMs + periodMs, pending.debounce_deadline ?? Number.MAX_SAFE_INTEGER);
  return { $set: { input, release_at: releaseAt, updated_at: new Date(nowMs).toISOString() }, $inc: { rev: 1 } };
}

/**
 * A pending debounced run whose time came: held behind its concurrency or throttle when it has
 * some (the gate lets it go), else due now.
 */
export function debounceReleased(run: RunDoc, nowMs: number) {
  const unset = { debounce_key: true as const, debounce_deadline: true as const };
  if (run.flow_key)
    return {
      $set: { held_at: nowMs, release_at: nowMs, queued_reason: run.flow?.concurrency !== undefined ? "concurrency" : "throttle" },
      $unset: unset,
      $inc: { rev: 1 },
    };
  return { $set: { due_at: nowMs }, $unset: { ...unset, release_at: true as const, queued_reason: true as const }, $inc: { rev: 1 } };
}

/**
 * A new run of `workflow`, held (as it is when the workflow has no flow control). Its line is the
 * concurrency's key, else the throttle's; a throttle over another key counts under its own.
 */
export function held(run: RunDoc, workflow: FlowWorkflow, nowMs: number): RunDoc {
  const { concurrency, throttle, debounce } = workflow;
  if (!concurrency && !throttle && !debounce) return run;
  const { due_at: _due, ...rest } = run;
  // Pending until its burst ends: no place in its key's line yet (the sweep releases it).
  const pending = debounce
    ? {
        debounce_key: `${workflow.id}/${keyOf(debounce.key, run.input)}`,
        debounce_deadline: nowMs + (debounce.max_wait_ms ?? DEBOUNCE_MAX_MS),
        release_at: nowMs + debounce.period_ms,
        queued_reason: "debounce" as const,
        flow: { debounce_ms: debounce.period_ms },
      }
    : undefined;
  if (!concurrency && !throttle) return { ...rest, ...pending };
  const key = keyOf(concurrency?.key ?? throttle?.key, run.input);
  const flow: RunFlow = {
    ...(concurrency && { concurrency: concurrency.limit }),
    // A throttle over another key than the run's line counts its starts under that key.
    ...(throttle && {
      throttle: {
        limit: throttle.limit,
        period_ms: throttle.period_ms,
        ...(concurrency && (throttle.key ?? "") !== (concurrency.key ?? "") && { key: `${workflow.id}/${keyOf(throttle.key, run.input)}` }),
      },
    }),
  };
  const line = {
    flow_key: `${workflow.id}/${key}`,
    flow,
    held_at: nowMs,
    release_at: nowMs,
    queued_reason: concurrency ? ("concurrency" as const) : ("throttle" as const),
  };
  if (!pending) return { ...rest, ...line };
  const { held_at: _h, ...waiting } = line;
  return { ...rest, ...waiting, ...pending, flow: { ...line.flow, ...pending.flow } };
}

/** A workflow's `concurrency`, `throttle` and `debounce`, checked. */
export function checkFlow(raw: { concurrency?: unknown; throttle?: unknown; debounce?: unknown }): {
  concurrency?: FlowConcurrency;
  throttle?: FlowThrottle;
  debounce?: FlowDebounce;
} {
  const concurrency = checkConcurrency(raw.concurrency);
  const throttle = checkThrottle(raw.throttle);
  const debounce = checkDebounce(raw.debounce);
  return { ...(concurrency && { concurrency }), ...(throttle && { throttle }), ...(debounce && { debounce }) };
}

/** The throttle window `nowMs` falls in: its start and end. */
export function windowOf(periodMs: number, nowMs: number): { start: number; end: number } {
  const start = nowMs - (nowMs % periodMs);
  return { start, end: start + periodMs };
}

/**
 * A run accepted (an inbound request) while its environment's RUN_STARTS_PER_MINUTE is spent: held
 * in its key's line (its workflow's own when it has no flow control) until a minute has room for
 * it, `startsLimit` per minute, from `nextMinute` on.
 */
export function overBudget(run: RunDoc, startsLimit: number, nextMinute: number, nowMs: number): RunDoc {
  const { due_at: _due, ...rest } = run;
  return {
    ...rest,
    flow_key: run.flow_key ?? `${run.workflow_id}/`,
    flow: { ...run.flow, starts: startsLimit },
    held_at: run.held_at ?? nowMs,
    release_at: nextMinute,
    queued_reason: "start_budget",
  };
}

/**
 * A retry's write (run-decisions.logic.ts `retry`) for a run under concurrency or throttle: held
 * again, at the end of its key's line, instead of due at once (it would pass its key's limit).
 */
export function heldAgain(run: RunDoc, write: RunWrite, nowMs: number): RunWrite {
  if (!run.flow_key || (run.flow?.concurrency === undefined && run.flow?.throttle === undefined)) return write;
  const { due_at: _due, ...set } = write.set;
  return {
    ...write,
    set: { ...set, held_at: nowMs, release_at: nowMs, queued_reason: run.flow.concurrency !== undefined ? "concurrency" : "throttle" },
    unset: { ...write.unset, due_at: true },
  };
}
