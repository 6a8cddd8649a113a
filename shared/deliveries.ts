import { collectionSpec } from "./storage/types";
import type { Delivery } from "./wire";

/**
 * The delivery log (contract section 8), shared by the webhooks service (reads it, asks for
 * redeliveries) and the webhook dispatcher (creates and advances it). One delivery per event and
 * webhook, kept across retries; every attempt is appended.
 *
 * Claiming: a delivery is due when `status` is `pending` and `due_at` (ms since the epoch) has
 * passed. A dispatcher claims it with one compare-and-set that moves `due_at` past the attempt's
 * time-out and writes a fresh `lease`; it records the outcome only where `lease` is still its own.
 * So a dispatcher killed mid-attempt leaves a delivery that falls due again when the lease runs
 * out, and two dispatchers never hold the same attempt at once. A settled delivery has neither
 * field: the claim index holds only pending deliveries (see IndexSpec on why that matters).
 */
export { DELIVERY_STATUSES, type Attempt, type DeliveryStatus } from "./wire";

/**
 * A webhook's signing secret starts with this (then 32 random bytes in base64): the webhooks
 * service makes secrets, the dispatcher signs deliveries with them (its signing.ts).
 */
export const SECRET_PREFIX = "whsec_";

/** Attempts in one series (the first and four retries); a redelivery starts a new series. */
export const ATTEMPTS_PER_SERIES = 5;

/** A delivery as stored: what the API shows (shared/wire.ts) and the fields that run the attempts. */
export interface DeliveryDoc extends Omit<Delivery, "object"> {
  org_id: string;
  /** Index in `attempts` where the current series began. */
  series_start: number;
  /** Internal: when the delivery may next be claimed (ms since the epoch); absent once settled. */
  due_at?: number;
  /** Internal: the current claim's token; absent when nobody holds one. */
  lease?: string;
}

export type DeliveryView = Delivery;

export const deliveryView = ({ org_id: _o, due_at: _d, lease: _l, series_start: _s, ...view }: DeliveryDoc): DeliveryView => ({
  object: "delivery",
  ...view,
});

/** The delivery log: owned by the webhook dispatcher, read by the webhooks service's API and by events' retention. */
export const DELIVERIES = collectionSpec<DeliveryDoc>("webhook_deliveries", [
  // One delivery per (event, webhook); event first, so retention finds an event's pending
  // deliveries through it (see services/events).
  { fields: { event_id: 1, webhook_id: 1 }, unique: true },
  // The delivery log's pages, all or by status.
  { fields: { org_id: 1, environment: 1, webhook_id: 1, id: -1 } },
  { fields: { org_id: 1, environment: 1, webhook_id: 1, status: 1, id: -1 } },
  // The claim index: only pending deliveries have `due_at`, so it holds just those, in due order.
  { fields: { due_at: 1 }, sparse: true },
]);
