import { createHash } from "node:crypto";
import { invalidParam } from "../../shared/errors";
import { EVENT_TYPE_PATTERN, isReservedType, isSystemType } from "../../shared/records/events";
import { formatPath } from "../../shared/api/json-limits";
import type { CancelOn, WaitForEventStep } from "../../shared/api/wire";
import { checkCondition, checkTemplates, type Fault } from "./expressions/check";
import { compile, evaluate, toCel } from "./expressions/cel";
import { TemplateError } from "./outputs";
import { render, wholeTemplate, type TemplateScope } from "./templates";
import { eventView } from "./trigger-match";

/**
 * Runs that wait for an event (a `wait_for_event` step) or are cancelled by one (a workflow's
 * `cancel_on`). Each is registered under a key: the event type and the values its `match` wants at
 * the paths it names, hashed. A stored event computes the key it would have under each set of
 * paths some run of its type waits with (its "shape", at most SHAPES_PER_TYPE_MAX per event type
 * and environment), and finds the registrations through an index on the key: its cost follows the
 * shapes and the runs it resolves, never the number waiting.
 */

/** Entries of one `match`. */
export const MATCH_KEYS_MAX = 5;
/** Characters of a path of `match` (`data.order.id`). */
export const MATCH_PATH_MAX = 200;
/** Characters of a value of `match`, once its templates are filled (a number or boolean is short). */
export const MATCH_VALUE_MAX = 256;
/** Entries of a workflow's `cancel_on`. */
export const CANCEL_ON_MAX = 5;
/** Distinct sets of match paths registered for one event type in one environment at once. */
export const SHAPES_PER_TYPE_MAX = 20;
/** A wait_for_event step's longest and default timeout; and how long a run's cancel_on holds when the run has no timeout. */
export const WAIT_MAX_MS = 30 * 24 * 60 * 60 * 1000;

const MATCH_PATH = /^data(\.[A-Za-z0-9_-]+)+$/;

export type MatchValue = string | number | boolean;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** An exact event type a wait or a cancel_on names (no pattern): custom, or one the platform emits. */
function checkEventType(fault: Fault, field: string, raw: unknown): string {
  if (typeof raw !== "string" || raw.length > 100 || !EVENT_TYPE_PATTERN.test(raw))
    throw fault(field, `${field.split(".").pop()} must be an event type such as 'payment.succeeded'`);
  if (isReservedType(raw) && !isSystemType(raw))
    throw fault(field, `Unknown event type '${raw}': GET /v1/events/types lists the system types`);
  return raw;
}

/**
 * `match`: at most MATCH_KEYS_MAX paths into the event (`data.…`) each with the value it must
 * equal: a string (templates allowed, over what `earlier` allows), a number or a boolean.
 */
export function checkMatch(
  fault: Fault,
  field: string,
  raw: unknown,
  earlier: ReadonlySet<string>,
  type: string,
): Record<string, MatchValue> {
  if (raw === undefined) return {};
  if (!isObject(raw)) throw fault(field, `${field.split(".").pop()} must be an object of event paths and the values they must equal`);
  const entries = Object.entries(raw);
  if (entries.length > MATCH_KEYS_MAX)
    throw fault(field, `match takes at most ${MATCH_KEYS_MAX} paths (MATCH_KEYS_MAX); it has ${entries.length}`);
  for (const [path, value] of entries) {
    const at = formatPath([path], field);
    if (path.length > MATCH_PATH_MAX) throw fault(at, `a match path has at most ${MATCH_PATH_MAX} characters`);
    if (!MATCH_PATH.test(path)) throw fault(at, `'${path}' is not a path into the event's data, such as 'data.order_id'`);
    if (typeof value === "string") {
      if (value.length > MATCH_VALUE_MAX) throw fault(at, `a match value has at most ${MATCH_VALUE_MAX} characters`);
      checkTemplates(fault, at, value, earlier, type);
    } else if (typeof value !== "number" && typeof value !== "boolean") {
      throw fault(at, "a match value is a string (templates allowed), a number or a boolean");
    }
  }
  return raw as Record<string, MatchValue>;
}

/** A wait_for_event step's own fields, checked; `fault` names `steps[i].<field>`. */
export function checkWaitStep(fault: Fault, id: string, item: Record<string, unknown>, earlier: ReadonlySet<string>): WaitForEventStep {
  const event_type = checkEventType(fault, "event_type", item.event_type);
  const match = checkMatch(fault, "match", item.match, earlier, "wait_for_event");
  const timeout = item.timeout_ms ?? WAIT_MAX_MS;
  if (typeof timeout !== "number" || !Number.isInteger(timeout) || timeout < 1 || timeout > WAIT_MAX_MS)
    throw fault("timeout_ms", `timeout_ms must be a whole number from 1 to ${WAIT_MAX_MS}`);
  return {
    id,
    type: "wait_for_event",
    event_type,
    match,
    ...(item.filter !== undefined && { filter: checkCondition(fault, "filter", item.filter, "event") }),
    timeout_ms: timeout,
  };
}

/** A workflow's `cancel_on`: at most CANCEL_ON_MAX entries of an event type and a match over the run's input. */
export function checkCancelOn(raw: unknown): CancelOn[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  const fault: Fault = (field, message) => invalidParam(field, `${field}: ${message}`);
  if (!Array.isArray(raw) || raw.length > CANCEL_ON_MAX)
    throw invalidParam(
      "cancel_on",
      `cancel_on must be a list of at most ${CANCEL_ON_MAX} entries (CANCEL_ON_MAX), each {"event_type", "match"}`,
    );
  return raw.map((entry, i) => {
    const at = `cancel_on[${i}]`;
    if (!isObject(entry)) throw fault(at, 'each entry must be an object {"event_type": …, "match": {…}}');
    const extra = Object.keys(entry).find((k) => k !== "event_type" && k !== "match");
    if (extra !== undefined)
      throw fault(formatPath([extra], at), `a cancel_on entry has no field ${JSON.stringify(extra)} (it takes event_type, match)`);
    return {
      event_type: checkEventType(fault, `${at}.event_type`, entry.event_type),
      match: checkMatch(fault, `${at}.match`, entry.match, new Set(), "cancel_on"),
    };
  });
}

/** `match` with its templates filled from `scope`: each value a string, number or boolean within MATCH_VALUE_MAX. */
export function resolvedMatch(match: Record<string, unknown>, scope: TemplateScope, field: string): Record<string, MatchValue> {
  const out: Record<string, MatchValue> = {};
  for (const [path, raw] of Object.entries(match)) {
    const value = render(raw, scope);
    if (typeof value !== "string" && typeof value !== "boolean" && !(typeof value === "number" && Number.isFinite(value)))
      throw new TemplateError(
        `${field}: '${path}' must equal a string, a number or a boolean; its template gave ${JSON.stringify(value) ?? "nothing"}`,
      );
    if (typeof value === "string" && value.length > MATCH_VALUE_MAX)
      throw new TemplateError(`${field}: the value for '${path}' is over ${MATCH_VALUE_MAX} characters (MATCH_VALUE_MAX) once filled`);
    out[path] = value;
  }
  return out;
}

const hash = (value: unknown): string => createHash("sha256").update(JSON.stringify(value)).digest("base64url").slice(0, 32);

/** The match's paths, sorted: its shape. */
export const pathsOf = (match: Record<string, unknown>): string[] => Object.keys(match).sort();

/** The id of a shape's document: one per tenant, event type and set of paths. */
export const shapeId = (tenant: { org_id: string; environment: string }, eventType: string, paths: string[]): string =>
  `shp_${hash([tenant.org_id, tenant.environment, eventType, paths])}`;

/** The key a registration is found under: the event type and the values at the sorted paths. */
export const keyOf = (eventType: string, match: Record<string, MatchValue>): string =>
  hash([eventType, pathsOf(match).map((p) => [p, match[p]])]);

/** The value at a dotted path of the event (`data.a.b`); undefined when absent. */
function valueAt(event: { data: Record<string, unknown> }, path: string): unknown {
  let at: unknown = event;
  for (const segment of path.split(".")) {
    if (!isObject(at) || !Object.prototype.hasOwnProperty.call(at, segment)) return undefined;
    at = at[segment];
  }
  return at;
}

/** What `event` holds at `paths`, when each is a string, number or boolean; else null (no registration of that shape can match). */
export function eventMatch(event: { data: Record<string, unknown> }, paths: string[]): Record<string, MatchValue> | null {
  const out: Record<string, MatchValue> = {};
  for (const path of paths) {
    const value = valueAt(event, path);
    if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") return null;
    out[path] = value;
  }
  return out;
}

/** Whether `event` holds every value of `match` (the key's hash matched: this rules out a collision). */
export const holds = (event: { data: Record<string, unknown> }, match: Record<string, MatchValue>): boolean =>
  Object.entries(match).every(([path, value]) => valueAt(event, path) === value);

/** Whether a wait's `filter` (CEL over `event`) lets `event` through; a filter that fails on it does not. */
export function filterPasses(filter: string | undefined, event: Parameters<typeof eventView>[0]): boolean {
  if (filter === undefined) return true;
  try {
    return evaluate(compile(wholeTemplate(filter.trim()) ?? filter, "event"), { event: toCel(eventView(event)) }) === true;
  } catch {
    return false;
  }
}
