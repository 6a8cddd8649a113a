import type { Clock } from "../../shared/runtime/clock";

/** A clock that moves only when the test moves it. */
export interface ManualClock extends Clock {
  set(ms: number): void;
  advance(ms: number): void;
}

export function manualClock(startMs: number): ManualClock {
  let at = startMs;
  return {
    now: () => at,
    set(ms) {
      at = ms;
    },
    advance(ms) {
      at += ms;
    },
  };
}
