import { createHash } from "node:crypto";
import { isId } from "../ids";
import { collectionSpec } from "../storage/types";
import type { Attempt, Delivery, Recovery } from "../api/wire";

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
export { DELIVERY_STATUSES, type Attempt, type DeliveryStatus } from "../api/wire";

/**
 * A webhook's signing secret starts with this (then 32 random bytes in base64): the webhooks
 * service makes secrets, the dispatcher signs deliveries with them (shared/net/signing.ts).
 */
export const SECRET_PREFIX = "whsec_";

/** Attempts in one series (the first and four retries); a redelivery starts a new series. */
export const ATTEMPTS_PER_SERIES = 5;

/**
 * Failures in a row before a webhook is disabled (contract 8): deliveries that exhausted their
 * series, and each failed attempt of a delivery started by hand (see `manual` on DeliveryDoc).
 */
export const DISABLE_AFTER_FAILURES = 10;

/** A delivery as stored: what the API shows (shared/api/wire.ts) and the fields that run the attempts. */
export interface DeliveryDoc extends Omit<Delivery, "object"> {
  org_id: string;
  /** Index in `attempts` where the current series began. */
  series_start: number;
  /** Internal: when the delivery may next be claimed (ms since the epoch); absent once settled. */
  due_at?: number;
  /** Internal: the current claim's token; absent when nobody holds one. */
  lease?: string;
  /** Internal: the request that emitted its event and its traceparent (shared/runtime/trace.ts); in log lines and as a child traceparent header. */
  request_id?: string;
  traceparent?: string;
  /** A test delivery's body (its event is not in the event log); other deliveries send their event's payload. */
  payload?: Record<string, unknown>;
  /**
   * Started by hand (a redelivery, a retry now, a test event, a recovery's batch): each failed
   * attempt of its series counts toward the webhook's failure streak at once, and its exhaustion
   * does not count again. So a webhook enabled again while its receiver still fails is disabled
   * after DISABLE_AFTER_FAILURES requests, not after that many whole series
   * (docs/webhooks-amplification.md).
   */
  manual?: true;
}

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

/**
 * The id of the delivery of event `eventId` to `webhookId` (or to a listener session, `ls_…`), the
 * same whoever computes it and however often: a fan-out repeated after a crash inserts the same id (refused as a duplicate), and
 * a receiver sees the same `webhook-id` on a delivery sent again. It sorts by the event's time (the
 * ULID time part of its id), which retention cuts deliveries along; the rest comes from a hash of
 * both ids.
 */
export function deliveryId(eventId: string, webhookId: string): string {
  const time = isId("evt", eventId) ? eventId.slice(4, 14) : "0000000000";
  const hash = createHash("sha256").update(eventId).update("\n").update(webhookId).digest();
  let rest = "";
  // 16 characters of 5 bits from the first 10 bytes.
  for (let bit = 0; bit < 80; bit += 5) {
    const byte = bit >> 3;
    const word = (hash[byte] << 8) | hash[byte + 1];
    rest += CROCKFORD[(word >> (11 - (bit & 7))) & 31];
  }
  return `del_${time}${rest}`;
}

export type DeliveryView = Delivery;

/** A delivery in full: every attempt with its request and answer. */
export const deliveryView = ({
  org_id: _o,
  due_at: _d,
  lease: _l,
  series_start: _s,
  request_id: _r,
  traceparent: _t,
  payload: _p,
  manual: _m,
  ...view
}: DeliveryDoc): DeliveryView => ({ object: "delivery", ...view });

/** An attempt as lists show it: the summary, without the request and the answer (GET …/deliveries/{id} has them). */
const attemptSummary = ({ request: _q, response: _r, ...summary }: Attempt): Attempt => summary;

/** A delivery as lists show it: each attempt's summary, so a page of 100 stays small. */
export const deliverySummary = (doc: DeliveryDoc): DeliveryView => {
  const view = deliveryView(doc);
  return { ...view, attempts: view.attempts.map(attemptSummary) };
};

/** The delivery log: owned by the webhook dispatcher, read by the webhooks service's API and by events' retention. */
export const DELIVERIES = collectionSpec<DeliveryDoc>("webhook_deliveries", [
  // One delivery per (event, webhook); event first, so retention finds an event's pending
  // deliveries through it (see services/events).
  { fields: { event_id: 1, webhook_id: 1 }, unique: true },
  // The delivery log's pages, all or by status.
  { fields: { org_id: 1, environment: 1, webhook_id: 1, id: -1 } },
  { fields: { org_id: 1, environment: 1, webhook_id: 1, status: 1, id: -1 } },
  // The log by event type, and by type and status; a date range is a range of ids (they sort by
  // the event's time), so every filter pages along one of these in id order.
  { fields: { org_id: 1, environment: 1, webhook_id: 1, event_type: 1, id: -1 } },
  { fields: { org_id: 1, environment: 1, webhook_id: 1, event_type: 1, status: 1, id: -1 } },
  // An event's deliveries (GET /events/{id}/deliveries), newest first.
  { fields: { org_id: 1, environment: 1, event_id: 1, id: -1 } },
  // The claim index: only pending deliveries have `due_at`, so it holds just those, in due order.
  { fields: { due_at: 1 }, sparse: true },
]);

/**
 * A recovery job as stored (POST /webhooks/{id}/recover): it walks the webhook's failed deliveries
 * of its range in id order, a batch at a time, from `cursor`; any dispatcher node runs the next
 * batch of a job due (`due_at`), under a lease like a delivery's, so a node stopped or killed
 * mid-job leaves it to be resumed.
 */
export interface RecoveryDoc extends Omit<Recovery, "object"> {
  org_id: string;
  /** The webhook id while the job runs: one running job per webhook (a unique, sparse index). */
  running?: string;
  /** The last delivery id handled; the next batch starts after it. */
  cursor: string;
  /** The first id past the range (from `until`), or absent. */
  end?: string;
  /** The ids the last batch redelivered: the next batch waits until each has made its first attempt. */
  batch?: string[];
  due_at?: number;
  lease?: string;
}

export const recoveryView = ({
  org_id: _o,
  running: _r,
  cursor: _c,
  end: _e,
  batch: _b,
  due_at: _d,
  lease: _l,
  ...view
}: RecoveryDoc): Recovery => ({
  object: "recovery",
  ...view,
});

/** Recovery jobs: owned by the webhook dispatcher, read by the webhooks service's API. */
export const RECOVERIES = collectionSpec<RecoveryDoc>("webhook_recoveries", [
  { fields: { running: 1 }, unique: true, sparse: true },
  { fields: { due_at: 1 }, sparse: true },
  { fields: { org_id: 1, environment: 1, webhook_id: 1, id: -1 } },
]);
