import type { ServiceBroker } from "moleculer";
import { newId } from "../ids";
import { collectionSpec, type Environment } from "../storage/types";
import type { PlatformEvent } from "../api/wire";

/**
 * The event log (contract section 7), written by the events service only: other services hand their
 * events over (`publishEvents`, through an outbox when the event records a state change: see
 * shared/runtime/outbox.ts). An event is stored first; only then
 * is the broker told (`event.stored`), and that broker event is a wake-up, nothing more: Moleculer
 * drops events no node listens to, so whoever reacts (the webhook dispatcher) also sweeps the log
 * for events it has not handled.
 */
export const EVENT_STORED = "event.stored";

/** Types only the platform emits, with what their `data` holds. Clients cannot emit these prefixes. */
export const SYSTEM_EVENT_TYPES = {
  "workflow.completed":
    "A run ended: workflow_id, run_id, status (succeeded, failed or cancelled), attempt, rerun_of, approvals (each decided approval step: step_id, decision, comment, decided_by, decided_at), cancelled_by and cancel_reason when cancelled through the API",
  "approval.requested": "A run reached an approval step: workflow_id, run_id, step_id, message",
  "api_key.created": "An API key was created: key_id, name, environment, created_by (null: issued with a new organization)",
  "api_key.revoked": "An API key was revoked: key_id, name, revoked_at, revoked_by (key_id and key_name of the key that revoked it)",
  "webhook.disabled": "A webhook was disabled after repeated failed deliveries: webhook_id, reason",
  "workflow.chain_limited":
    "A chain of event-started runs was stopped, and an event's run was not started (once per chain): root_event_id, event_id, workflow_id, reason (runs: the chain started `limit` runs; depth: `limit` event-started runs in a row led to the event), limit",
  "approval.decided":
    "An approval step was decided: workflow_id, run_id, step_id, decision (approved or rejected), comment, decided_by, decided_at",
  "workflow.deleted": "A workflow was deleted (its runs not ended are cancelled): workflow_id, name, deleted_at, deleted_by",
  "webhook.deleted": "A webhook was deleted: webhook_id, url, deleted_at, deleted_by",
  "member.role_changed":
    "A member's role was changed (PATCH /orgs/{id}/members/{member_id}), in the environment of the key that changed it: member_id, email, previous_role, role, role_changed_by, role_changed_at",
} as const;
export type SystemEventType = keyof typeof SYSTEM_EVENT_TYPES;

export const RESERVED_PREFIXES = ["workflow.", "approval.", "api_key.", "webhook."] as const;
/** System types outside the reserved prefixes: reserved one by one. */
export const RESERVED_TYPES = ["member.role_changed"] as const;

/** Lower-case dotted names such as `order.created`: at least two parts. */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
export const EVENT_TYPE_MAX = 100;

export const isSystemType = (type: string): type is SystemEventType => Object.prototype.hasOwnProperty.call(SYSTEM_EVENT_TYPES, type);
/** A reserved prefix, or a system type outside them (`member.role_changed`: `member.*` stays open to clients' own events). */
export const isReservedType = (type: string): boolean => RESERVED_PREFIXES.some((p) => type.startsWith(p)) || isSystemType(type);

/** An event as stored: what the API shows (shared/api/wire.ts) and the markers the services work from. */
export interface EventDoc extends Omit<PlatformEvent, "object"> {
  org_id: string;
  /**
   * Internal: ms since the epoch, present until a dispatcher has created this event's deliveries;
   * the sweep looks for old ones. Absent afterwards, so its index holds only the undispatched.
   */
  undispatched_since?: number;
  /** Internal: the same for the workflows service, until it has started the runs this event triggers. */
  untriggered_since?: number;
  /** Internal: the workflow whose run emitted this event; it does not trigger that workflow again. */
  origin_workflow_id?: string;
  /** Internal: how many event-started runs led to this event (0 or absent: none). */
  chain_depth?: number;
  /** Internal: the event that began the chain of runs that led to this one (absent: this event is a root). */
  chain_root?: string;
  /** Internal: the request that emitted it and its traceparent (shared/runtime/trace.ts), passed on to its deliveries and runs. */
  request_id?: string;
  traceparent?: string;
}

export type EventView = PlatformEvent;

/** The body POSTed to webhook receivers (spec section 2), in this key order. */
export interface EventPayload {
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
}

export const eventView = ({ id, type, created_at, data, environment, source }: EventDoc): EventView => ({
  object: "event",
  id,
  type,
  created_at,
  data,
  environment,
  source,
});

export const payloadOf = ({ id, type, created_at, data }: EventDoc): EventPayload => ({ id, type, created_at, data });

/** The event log; owned by the events service, read by the services that react to events. */
export const EVENTS = collectionSpec<EventDoc>("events", [
  { fields: { org_id: 1, environment: 1, id: -1 } },
  { fields: { org_id: 1, environment: 1, type: 1, id: -1 } },
  { fields: { undispatched_since: 1 }, sparse: true },
  { fields: { untriggered_since: 1 }, sparse: true },
]);

/** The "not yet handled" marker of each service that reacts to events (see shared/runtime/event-consumer.ts). */
export const MARKERS = ["undispatched_since", "untriggered_since"] as const;
export type Marker = (typeof MARKERS)[number];

export interface NewEvent {
  org_id: string;
  environment: Environment;
  type: string;
  data: Record<string, unknown>;
  source: string;
  origin_workflow_id?: string;
  chain_depth?: number;
  chain_root?: string;
  request_id?: string;
  traceparent?: string;
}

/** An event another service hands to the events service to store: its id and time fixed, so a second hand-over stores nothing. */
export interface PublishedEvent extends NewEvent {
  id: string;
  created_at: string;
}

export const publishedEvent = (input: NewEvent, now: number): PublishedEvent => ({
  id: newId("evt"),
  ...input,
  created_at: new Date(now).toISOString(),
});

/** An event as stored: marked for each service that reacts to events (see shared/runtime/event-consumer.ts). */
export function eventDoc(input: NewEvent & { id?: string; created_at?: string }, now: number): EventDoc {
  const { id = newId("evt"), created_at = new Date(now).toISOString(), origin_workflow_id, chain_depth, chain_root, ...fields } = input;
  return {
    id,
    ...fields,
    created_at,
    undispatched_since: now,
    untriggered_since: now,
    ...(origin_workflow_id && { origin_workflow_id }),
    ...(chain_depth && { chain_depth }),
    ...(chain_root && { chain_root }),
  };
}

/**
 * Asks the events service (the event log's owner) to store `events` and wake whoever reacts; an
 * event whose id is stored already is skipped, so handing one over twice is harmless. Answers the
 * ids it stored now.
 */
export const publishEvents = (broker: ServiceBroker, events: PublishedEvent[]): Promise<string[]> =>
  broker.call<string[], { events: PublishedEvent[] }>("events.publish", { events });

/** The most ids one `events.unmark` takes. */
export const UNMARK_MAX = 1000;

/** Asks the events service to unset a marker on events: one call per batch (of up to UNMARK_MAX), whatever the batch's size. */
export const unmarkThrough =
  (broker: ServiceBroker) =>
  async (marker: Marker, ids: string[]): Promise<void> => {
    for (let i = 0; i < ids.length; i += UNMARK_MAX) await broker.call("events.unmark", { marker, ids: ids.slice(i, i + UNMARK_MAX) });
  };
