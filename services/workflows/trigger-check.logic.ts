import { ApiError, invalidParam, notOneOf } from "../../shared/errors";
import { EVENT_TYPE_PATTERN, isReservedType, isSystemType } from "../../shared/records/events";
import { formatPath } from "../../shared/api/json-limits";
import type { Trigger } from "../../shared/api/wire";
import { checkCondition, type Fault } from "./expressions/check";
import { checkWebhookTrigger } from "./hooks.logic";
import { checkScheduleTrigger } from "./schedule-trigger.logic";
import { isPattern, MAX_STARS, validPattern } from "./trigger-match";

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The trigger, checked: manual, or an event type (a custom type, or one the platform emits, or a
 * pattern with `*` for one segment) with an optional filter, CEL over `event`; a schedule
 * (schedule-trigger.logic.ts) or an inbound webhook (hooks.logic.ts).
 */
export function checkTrigger(raw: unknown): Trigger {
  if (!isObject(raw))
    throw invalidParam("trigger", 'trigger must be an object: {"type":"manual"} or {"type":"event","event_type":"order.created"}');
  if (raw.type === "schedule") return checkScheduleTrigger(raw);
  if (raw.type === "webhook") return checkWebhookTrigger(raw);
  const unknown = Object.keys(raw).find((k) => k !== "type" && k !== "event_type" && !(raw.type === "event" && k === "filter"));
  if (unknown !== undefined)
    throw new ApiError("parameter_unknown", `trigger has no field ${JSON.stringify(unknown)}`, { param: formatPath([unknown], "trigger") });
  if (raw.type === "manual") {
    if (raw.event_type !== undefined)
      throw new ApiError("parameter_unknown", "a manual trigger takes no event_type", { param: "trigger.event_type" });
    return { type: "manual" };
  }
  if (raw.type !== "event") throw notOneOf("trigger.type", ["manual", "event", "schedule", "webhook"], raw.type);
  const type = raw.event_type;
  const pattern = typeof type === "string" && isPattern(type);
  if (typeof type !== "string" || !(pattern ? validPattern(type) : EVENT_TYPE_PATTERN.test(type))) {
    throw invalidParam(
      "trigger.event_type",
      `trigger.event_type must be an event type such as 'order.created', or a pattern with * for one segment such as 'order.*' (at most ${MAX_STARS} *)`,
    );
  }
  if (!pattern && isReservedType(type) && !isSystemType(type)) {
    throw invalidParam("trigger.event_type", `Unknown event type '${type}': GET /v1/events/types lists the system types`);
  }
  const fault: Fault = (field, message) => invalidParam(`trigger.${field}`, `trigger.${field}: ${message}`);
  if (raw.filter === undefined) return { type: "event", event_type: type };
  return { type: "event", event_type: type, filter: checkCondition(fault, "filter", raw.filter, "event") };
}
