/** Event types as clients write them (exact, custom, patterns) and the event log's resources. */
import { EVENT_TYPE_MAX, RESERVED_PREFIXES, SYSTEM_EVENT_TYPES } from "../../records/events";
import { anyObject, environment, idOf, type JsonSchema, object, objectTag, time } from "./common";

/** Lower-case dotted names (shared/records/events.ts EVENT_TYPE_PATTERN). */
export const EVENT_TYPE = {
  type: "string",
  pattern: "^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)+$",
  maxLength: EVENT_TYPE_MAX,
  examples: ["order.created"],
} as const;
/** What a client may emit, subscribe to or trigger on: a custom type, or (subscribe, trigger) a system type. */
export const CUSTOM_EVENT_TYPE = {
  ...EVENT_TYPE,
  description: `A custom event type: not under the reserved prefixes ${RESERVED_PREFIXES.join(", ")}`,
  not: { pattern: `^(${RESERVED_PREFIXES.map((p) => p.replace(".", "\\.")).join("|")})` },
} as const;
/** An event trigger's type with `*` for one or two whole segments (`order.*`). */
const SEGMENT = "[a-z][a-z0-9_]*";
export const EVENT_TYPE_PATTERN = {
  type: "string",
  pattern: `^(?:(?:${SEGMENT}\\.)*\\*(?:\\.${SEGMENT})*(?:\\.\\*)?(?:\\.${SEGMENT})*)$`,
  not: { pattern: "^\\*$" },
  maxLength: EVENT_TYPE_MAX,
  description: "An event type with `*` standing for one segment, at most twice",
  examples: ["order.*"],
};
export const SUBSCRIBABLE_EVENT_TYPE = { anyOf: [CUSTOM_EVENT_TYPE, { type: "string", enum: Object.keys(SYSTEM_EVENT_TYPES) }] };

/** Events and their types. */
export const EVENT_RESOURCES: Record<string, JsonSchema> = {
  Event: object("Event", {
    object: objectTag("event"),
    id: idOf("evt"),
    environment,
    type: EVENT_TYPE,
    data: anyObject,
    source: { type: "string", description: "`api` for events clients emit, else the emitting service" },
    created_at: time,
  }),
  EventType: object(
    "EventType",
    {
      object: objectTag("event_type"),
      type: EVENT_TYPE,
      description: { type: ["string", "null"], description: "A system type's meaning; null for custom types" },
      system: { type: "boolean" },
      first_seen_at: { ...time, description: "Custom types: when this environment first emitted it" },
    },
    ["first_seen_at"],
  ),
};
