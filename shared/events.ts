import type { ServiceBroker } from "moleculer";
import { newId } from "./ids";
import type { AtomicWrite, Collection, Doc, Environment, Store } from "./storage/types";
import type { PlatformEvent } from "./wire";

/**
 * The event log every service writes to (contract section 7). An event is stored first; only then
 * is the broker told (`event.stored`), and that broker event is a wake-up, nothing more: Moleculer
 * drops events no node listens to, so whoever reacts (the webhook dispatcher) also sweeps the log
 * for events it has not handled.
 */
export const EVENT_STORED = "event.stored";

/** Types only the platform emits, with what their `data` holds. Clients cannot emit these prefixes. */
export const SYSTEM_EVENT_TYPES = {
  "workflow.completed": "A run ended: workflow_id, run_id, status (succeeded, failed or cancelled)",
  "approval.requested": "A run reached an approval step: workflow_id, run_id, step_id, message",
  "api_key.created": "An API key was created: key_id, name, environment",
  "api_key.revoked": "An API key was revoked: key_id, name, revoked_at",
  "webhook.disabled": "A webhook was disabled after repeated failed deliveries: webhook_id, reason",
  "workflow.chain_limited":
    "A chain of event-started runs used its budget, and an event's run was not started (once per chain): root_event_id, event_id, workflow_id, limit",
} as const;
export type SystemEventType = keyof typeof SYSTEM_EVENT_TYPES;

export const RESERVED_PREFIXES = ["workflow.", "approval.", "api_key.", "webhook."] as const;

/** Lower-case dotted names such as `order.created`: at least two parts. */
export const EVENT_TYPE_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
export const EVENT_TYPE_MAX = 100;

export const isReservedType = (type: string): boolean => RESERVED_PREFIXES.some((p) => type.startsWith(p));
export const isSystemType = (type: string): type is SystemEventType => Object.prototype.hasOwnProperty.call(SYSTEM_EVENT_TYPES, type);

/** An event as stored: what the API shows (shared/wire.ts) and the markers the services work from. */
export interface EventDoc extends PlatformEvent {
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
  id,
  type,
  created_at,
  data,
  environment,
  source,
});

export const payloadOf = ({ id, type, created_at, data }: EventDoc): EventPayload => ({ id, type, created_at, data });

export function eventsCollection(store: Store): Collection<EventDoc> {
  return store.collection<EventDoc>("events", [
    { fields: { org_id: 1, environment: 1, id: -1 } },
    { fields: { org_id: 1, environment: 1, type: 1, id: -1 } },
    { fields: { undispatched_since: 1 }, sparse: true },
    { fields: { untriggered_since: 1 }, sparse: true },
  ]);
}

export interface NewEvent {
  org_id: string;
  environment: Environment;
  type: string;
  data: Record<string, unknown>;
  source: string;
  /** Given by a caller that must record the event exactly once (a retried insert then fails as a duplicate). */
  id?: string;
  origin_workflow_id?: string;
  chain_depth?: number;
  chain_root?: string;
}

/** An event as stored: marked for each service that reacts to events (see shared/event-consumer.ts). */
export function eventDoc(input: NewEvent, now: number): EventDoc {
  const { id = newId("evt"), origin_workflow_id, chain_depth, chain_root, ...fields } = input;
  return {
    id,
    ...fields,
    created_at: new Date(now).toISOString(),
    undispatched_since: now,
    untriggered_since: now,
    ...(origin_workflow_id && { origin_workflow_id }),
    ...(chain_depth && { chain_depth }),
    ...(chain_root && { chain_root }),
  };
}

/**
 * Stores `writes` and the event that records them in one atomic write (the outbox: both or
 * neither), then wakes whoever reacts to events. Answers null, storing nothing, when an update among
 * `writes` matched no document; else the documents written, as `Store.atomically` answers them.
 */
export async function recordWith(
  store: Store,
  events: Collection<EventDoc>,
  broker: ServiceBroker,
  writes: AtomicWrite[],
  input: NewEvent,
): Promise<Doc[] | null> {
  const event = eventDoc(input, Date.now());
  const written = await store.atomically([...writes, { op: "insert", collection: events, doc: event }]);
  if (!written) return null;
  broker.emit(EVENT_STORED, { event }).catch(() => undefined);
  return written.slice(0, writes.length);
}

/** Stores an event, then wakes whoever reacts to events (one node of each listening service). */
export async function recordEvent(events: Collection<EventDoc>, broker: ServiceBroker, input: NewEvent): Promise<EventDoc> {
  const doc = eventDoc(input, Date.now());
  await events.insert(doc);
  // A lost wake-up only delays the reaction until the next sweep of the log.
  broker.emit(EVENT_STORED, { event: doc }).catch(() => undefined);
  return doc;
}
