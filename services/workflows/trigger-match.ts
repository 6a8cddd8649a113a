import { EVENT_TYPE_MAX } from "../../shared/records/events";
import type { EventDoc } from "../../shared/records/events";
import { compile, evaluate, toCel } from "./expressions/cel";
import { wholeTemplate } from "./templates";
import type { Trigger } from "../../shared/api/wire";
import type { ReadView, Tenant } from "../../shared/storage/types";
import type { WorkflowDoc } from "./workflows.logic";

/**
 * Which event-triggered workflows an event starts. An `event_type` is a type (`order.created`) or a
 * pattern with `*` for one whole segment (`order.*`, `*.created`). Workflows are found through
 * indexes, never by reading every workflow: exact types by `trigger.event_type`, patterns by the
 * part before their first `*` (`trigger_prefix`), of which an event of n segments has n candidates.
 */
export const TYPE_PATTERN = /^(?:[a-z][a-z0-9_]*|\*)(?:\.(?:[a-z][a-z0-9_]*|\*))+$/;

export const isPattern = (eventType: string): boolean => eventType.includes("*");

/** What a pattern is indexed by: its text before the first `*` (`order.` for `order.*`, empty for `*.created`). */
export const patternPrefix = (pattern: string): string => pattern.slice(0, pattern.indexOf("*"));

/** The prefixes of patterns that can match `type`: the empty one and each run of its leading segments, with the dot after. */
export function prefixesOf(type: string): string[] {
  const prefixes = [""];
  for (let i = type.indexOf("."); i >= 0; i = type.indexOf(".", i + 1)) prefixes.push(type.slice(0, i + 1));
  return prefixes;
}

/** Whether `type` matches `pattern` segment by segment (`*`: any one segment). */
export function matchesType(pattern: string, type: string): boolean {
  if (!isPattern(pattern)) return pattern === type;
  const want = pattern.split(".");
  const got = type.split(".");
  return want.length === got.length && want.every((segment, i) => segment === "*" || segment === got[i]);
}

export const validPattern = (pattern: string): boolean => pattern.length <= EVENT_TYPE_MAX && TYPE_PATTERN.test(pattern);

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

/** The active workflows whose event trigger may match one of `types`: two indexed reads, whatever the number of workflows. */
export async function listenersOf(workflows: ReadView<WorkflowDoc>, tenant: Required<Tenant>, types: string[]): Promise<WorkflowDoc[]> {
  const distinct = [...new Set(types)];
  const prefixes = [...new Set(distinct.flatMap(prefixesOf))];
  const [exact, patterns] = await Promise.all([
    workflows.find(tenant, { "trigger.event_type": { $in: distinct }, status: "active" }),
    workflows.find(tenant, { trigger_prefix: { $in: prefixes }, status: "active" }),
  ]);
  return [...exact.filter((wf) => wf.trigger.type === "event"), ...patterns];
}
