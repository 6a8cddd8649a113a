import type { ServiceBroker, ServiceSchema } from "moleculer";
import type { EventDoc } from "./events";
import { collectionSpec, type Environment } from "../storage/types";

/**
 * Listener sessions (`GET /v1/listen`, the CLI's `listen --forward-to`): a gateway node holds each
 * stream; the event may be stored by any node. Sending every event to every gateway would cost a
 * NATS message per event with nobody listening, so gateways announce the tenants they hold streams
 * for, and a node that stores an event broadcasts it to the gateways only when its tenant is
 * announced: with no listener, an event costs one map lookup more.
 *
 * A gateway announces on every change, every ANNOUNCE_MS while it holds a stream, and when a node
 * joins (which then learns at once); an announcement it stops renewing (the gateway died) lapses
 * after three periods.
 */
export const LISTENERS_ANNOUNCE = "listeners.announce";
/** An event of an announced tenant, to every gateway node. */
export const LISTENER_EVENT = "listeners.event";
export const ANNOUNCE_MS = 5_000;
const LAPSE_MS = 3 * ANNOUNCE_MS;

export interface ListenedTenant {
  org_id: string;
  environment: Environment;
}
export interface Announcement {
  node_id: string;
  tenants: ListenedTenant[];
}
/**
 * A listener session as stored when its stream opens (the gateway asks the dispatcher, which owns
 * the listener's part of the delivery log): a report of a local answer names a session of the
 * reporter's own tenant, or is refused. Pruned with the delivery log (EVENT_RETENTION_DAYS).
 */
export interface ListenerSessionDoc {
  id: string;
  org_id: string;
  environment: Environment;
  /** The API key that opened the stream. */
  key_id: string;
  created_at: string;
}
export const LISTENER_SESSIONS = collectionSpec<ListenerSessionDoc>("listener_sessions", []);

/** What a gateway receives: the event's public fields and its tenant. */
export interface ListenerEvent {
  org_id: string;
  environment: Environment;
  id: string;
  type: string;
  created_at: string;
  data: Record<string, unknown>;
  source: string;
}

const tenantKey = (org_id: string, environment: string) => `${org_id}\n${environment}`;

/** tenant → announcing gateway node → when its announcement lapses (ms since the epoch). */
type Registry = Map<string, Map<string, number>>;
const registries = new WeakMap<ServiceBroker, Registry>();

function registryOf(broker: ServiceBroker): Registry {
  let registry = registries.get(broker);
  if (!registry) registries.set(broker, (registry = new Map()));
  return registry;
}

/** Takes one gateway's announcement: its tenants are now exactly these. */
export function noteAnnouncement(broker: ServiceBroker, { node_id, tenants }: Announcement, now = Date.now()): void {
  const registry = registryOf(broker);
  const announced = new Set(tenants.map((t) => tenantKey(t.org_id, t.environment)));
  for (const [key, nodes] of registry) {
    if (!announced.has(key)) nodes.delete(node_id);
    if (nodes.size === 0) registry.delete(key);
  }
  for (const key of announced) {
    let nodes = registry.get(key);
    if (!nodes) registry.set(key, (nodes = new Map()));
    nodes.set(node_id, now + LAPSE_MS);
  }
}

/** Whether a gateway announced a stream for this tenant (lapsed announcements are dropped here). */
export function isListened(broker: ServiceBroker, org_id: string, environment: string, now = Date.now()): boolean {
  const registry = registries.get(broker);
  if (registry === undefined || registry.size === 0) return false;
  const key = tenantKey(org_id, environment);
  const nodes = registry.get(key);
  if (!nodes) return false;
  for (const [node, until] of nodes) if (until < now) nodes.delete(node);
  if (nodes.size === 0) registry.delete(key);
  return nodes.size > 0;
}

/** After an event is stored: to the gateways when someone listens to its tenant. */
export function forwardToListeners(broker: ServiceBroker, event: EventDoc): void {
  if (!isListened(broker, event.org_id, event.environment)) return;
  const { org_id, environment, id, type, created_at, data, source } = event;
  const payload: ListenerEvent = { org_id, environment, id, type, created_at, data, source };
  broker.broadcast(LISTENER_EVENT, payload, { groups: ["gateway"] }).catch(() => undefined);
}

/** The events service, the event log's one writer, learns the announcements through this mixin. */
export const ListenerAnnouncementsMixin: Partial<ServiceSchema> = {
  events: {
    [LISTENERS_ANNOUNCE]: {
      handler(ctx: { params: Announcement }) {
        noteAnnouncement((this as unknown as { broker: ServiceBroker }).broker, ctx.params);
      },
    },
  },
};

/**
 * `--events a.b,c.*`: `*` is every type, `c.*` every type under `c.`, anything else one type.
 */
export function typeMatches(patterns: readonly string[], type: string): boolean {
  if (patterns.length === 0) return true;
  return patterns.some((p) => p === "*" || p === type || (p.endsWith(".*") && type.startsWith(p.slice(0, -1))));
}
