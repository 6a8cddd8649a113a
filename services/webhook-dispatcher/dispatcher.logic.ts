import { ATTEMPTS_PER_SERIES, type Attempt, type DeliveryDoc, type DeliveryStatus } from "../../shared/deliveries";

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
export function outcomeOf(delivery: Pick<DeliveryDoc, "attempts" | "series_start">, attempt: Attempt, delays: readonly number[], nowMs: number, random = Math.random()): Outcome {
  const ok = attempt.status_code !== null && attempt.status_code >= 200 && attempt.status_code < 300;
  if (ok) return { status: "succeeded", dueAt: null };
  const inSeries = delivery.attempts.length + 1 - delivery.series_start;
  if (inSeries >= ATTEMPTS_PER_SERIES) return { status: "failed", dueAt: null };
  const delay = delays[Math.min(inSeries - 1, delays.length - 1)];
  return { status: "pending", dueAt: nowMs + Math.round(delay * (1 + 0.1 * random)) };
}
