import { idParam } from "../../shared/api/pagination";

/** The most ticks one backfill may start (a longer range is refused: split it). */
export const BACKFILL_MAX_TICKS = 100;

const instant = { type: "string", min: 1, max: 64 } as const;

export const backfillParams = { $$strict: true, id: idParam, from: instant, to: instant } as const;
export interface BackfillParams {
  id: string;
  /** The range's ticks: from ≤ tick < to, both ISO 8601 times, `to` not after now. */
  from: string;
  to: string;
}
