import { EVENT_TYPE_MAX } from "../../shared/records/events";
import type { EventDoc } from "../../shared/records/events";
import { compile, evaluate, toCel } from "./expressions/cel";
import { wholeTemplate } from "./templates";
import type { Trigger } from "../../shared/api/wire";
import type { Doc, ReadView, Tenant } from "../../shared/storage/types";

/**
 * Which event-triggered workflows an event starts. An `event_type` is a type (`order.created`) or a
 * pattern with `*` for one whole segment (`order.*`, `*.created`), at most MAX_STARS of them.
 * Workflows are found in one indexed read by `trigger.event_type`: the event's type and every
 * pattern that can match it (n + n(n-1)/2 for a type of n segments: 6 for 3, 1,275 at most for the
 * longest type, 50 segments in 100 characters), never by reading every workflow.
 */
export const TYPE_PATTERN = /^(?:[a-z][a-z0-9_]*|\*)(?:\.(?:[a-z][a-z0-9_]*|\*))+$/;
export const MAX_STARS = 2;

export const isPattern = (eventType: string): boolean => eventType.includes("*");

/** The patterns that match `type`: each way of putting `*` for 1 to MAX_STARS of its segments. */
export function patternsOf(type: string): string[] {
  const segments = type.split(".");
  const patterns: string[] = [];
  const starred = (at: number[]) => segments.map((s, i) => (at.includes(i) ? "*" : s)).join(".");
  for (let i = 0; i < segments.length; i++) {
    patterns.push(starred([i]));
    for (let j = i + 1; j < segments.length && MAX_STARS >= 2; j++) patterns.push(starred([i, j]));
  }
  return patterns;
}

/** Whether `type` matches `pattern` segment by segment (`*`: any one segment). */
export function matchesType(pattern: string, type: string): boolean {
  if (!isPattern(pattern)) return pattern === type;
  const want = pattern.split(".");
  const got = type.split(".");
  return want.length === got.length && want.every((segment, i) => segment === "*" || segment === got[i]);
}

export const validPattern = (pattern: string): boolean =>
  pattern.length <= EVENT_TYPE_MAX && TYPE_PATTERN.test(pattern) && pattern.split("*").length - 1 <= MAX_STARS;

/** The event as a trigger's filter sees it (and as the run's `input.event` holds it). */
export const eventView = (event: Pick<EventDoc, "id" | "type" | "created_at" | "data">) => ({
  id: event.id,
  type: event.type,
  created_at: event.created_at,
  data: event.data,
});

/**
 * Whether `event` starts a run of a workflow with `trigger`: its type matches and its filter (CEL
 * over `event`) gives true. A filter that fails on this event (a missing field, …) does not pass:
 * `why` says so, for the log.
 */
export function passes(trigger: Trigger, event: Pick<EventDoc, "id" | "type" | "created_at" | "data">): { ok: boolean; why?: string } {
  if (trigger.type !== "event" || !matchesType(trigger.event_type, event.type)) return { ok: false };
  if (trigger.filter === undefined) return { ok: true };
  const source = wholeTemplate(trigger.filter.trim()) ?? trigger.filter;
  try {
    const value = evaluate(compile(source, "event"), { event: toCel(eventView(event)) });
    if (typeof value === "boolean") return { ok: value };
    return { ok: false, why: `the filter gave ${JSON.stringify(value)}, not true or false` };
  } catch (err) {
    return { ok: false, why: `the filter failed: ${(err as Error).message}` };
  }
}

/** The active workflows whose event trigger may match one of `types`: one indexed read, whatever the number of workflows. */
export async function listenersOf<W extends Doc & { trigger: Trigger }>(
  workflows: ReadView<W>,
  tenant: Required<Tenant>,
  types: string[],
): Promise<W[]> {
  const distinct = [...new Set(types)];
  const candidates = [...new Set([...distinct, ...distinct.flatMap(patternsOf)])];
  const found = await workflows.find(tenant, { "trigger.event_type": { $in: candidates }, status: "active" });
  return found.filter((wf) => wf.trigger.type === "event");
}
