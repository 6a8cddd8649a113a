import { ATTEMPTS_PER_SERIES, deliveryId, type Attempt, type DeliveryDoc, type DeliveryStatus } from "../../shared/records/deliveries";

export { deliveryId };
import type { Update } from "../../shared/storage/types";
import { traceOf, type Trace } from "../../shared/runtime/trace";

/** What an attempt's outcome does to its delivery: settle it, or schedule the next attempt. */
export interface Outcome {
  status: DeliveryStatus;
  /** When the next attempt falls due (ms since the epoch); null once settled. */
  dueAt: number | null;
}

/**
 * After attempt `attempt` of `delivery`: success settles it; a failure waits `delays[n-1]` (plus up
 * to 10 % jitter, so receivers that fail together are not retried together) until the series'
 * fifth attempt, after which the delivery has failed.
 */
export function outcomeOf(
  delivery: Pick<DeliveryDoc, "attempts" | "series_start">,
  attempt: Attempt,
  delays: readonly number[],
  nowMs: number,
  random = Math.random(),
): Outcome {
  const ok = attempt.status_code !== null && attempt.status_code >= 200 && attempt.status_code < 300;
  if (ok) return { status: "succeeded", dueAt: null };
  const inSeries = delivery.attempts.length + 1 - delivery.series_start;
  if (inSeries >= ATTEMPTS_PER_SERIES) return { status: "failed", dueAt: null };
  const delay = delays[Math.min(inSeries - 1, delays.length - 1)];
  return { status: "pending", dueAt: nowMs + Math.round(delay * (1 + 0.1 * random)) };
}

/** A delivery this node holds a claim on. */
export type Claimed = DeliveryDoc & Required<Pick<DeliveryDoc, "due_at" | "lease">>;

/** A delivery not stored yet: its first attempt is made before its row is written (see the dispatcher). */
export function freshDelivery(
  tenant: Pick<DeliveryDoc, "org_id" | "environment">,
  event: { id: string; type: string } & Trace,
  webhookId: string,
  at: string,
): DeliveryDoc {
  return {
    ...traceOf(event),
    id: deliveryId(event.id, webhookId),
    org_id: tenant.org_id,
    environment: tenant.environment,
    webhook_id: webhookId,
    event_id: event.id,
    event_type: event.type,
    status: "pending",
    attempts: [],
    series_start: 0,
    next_attempt_at: at,
    created_at: at,
    updated_at: at,
  };
}

/**
 * A new delivery of `event` to `webhookId` at time `at` (ISO, one for a whole fan-out), created
 * already claimed (`lease`, until `dueAt`) by the node that sends it first.
 */
export function claimedDelivery(
  tenant: Pick<DeliveryDoc, "org_id" | "environment">,
  event: { id: string; type: string } & Trace,
  webhookId: string,
  at: string,
  claim: { dueAt: number; lease: string },
): Claimed {
  return { ...freshDelivery(tenant, event, webhookId, at), due_at: claim.dueAt, lease: claim.lease };
}

/**
 * `delivery` (not stored yet) as settled by its first attempt: the document to insert, in the same
 * state `settlement` would leave a stored one in.
 */
export function settledDelivery(delivery: DeliveryDoc, outcome: Outcome, attempt: Attempt | null, nowMs: number): DeliveryDoc {
  const { due_at: _d, lease: _l, ...rest } = delivery;
  return {
    ...rest,
    status: outcome.status,
    attempts: attempt ? [...delivery.attempts, attempt] : delivery.attempts,
    next_attempt_at: outcome.dueAt === null ? null : new Date(outcome.dueAt).toISOString(),
    updated_at: new Date(nowMs).toISOString(),
    ...(outcome.dueAt !== null && { due_at: outcome.dueAt }),
  };
}

/** Which of `peers` (node ids, sorted) sweeps the event `eventId`: ULIDs' last characters spread evenly. */
export function ownerOf(eventId: string, peers: readonly string[]): string {
  if (peers.length === 1) return peers[0];
  let h = 0;
  for (let i = Math.max(0, eventId.length - 6); i < eventId.length; i++) h = (h * 31 + eventId.charCodeAt(i)) | 0;
  return peers[(h >>> 0) % peers.length];
}

/** The store update that records an attempt (if one was made) and its outcome, and gives up the claim. */
export function settlement(outcome: Outcome, attempt: Attempt | null, nowMs: number): Update {
  return {
    $set: {
      status: outcome.status,
      ...(outcome.dueAt !== null && { due_at: outcome.dueAt }),
      next_attempt_at: outcome.dueAt === null ? null : new Date(outcome.dueAt).toISOString(),
      updated_at: new Date(nowMs).toISOString(),
    },
    $unset: outcome.dueAt === null ? { due_at: true, lease: true } : { lease: true },
    ...(attempt && { $push: { attempts: attempt } }),
  };
}

/** Whether a webhook subscribed to `events` gets an event of `type`. */
export const subscribes = (events: readonly string[], type: string): boolean => events[0] === "*" || events.includes(type);
