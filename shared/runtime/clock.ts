/**
 * Where the code that counts time by the clock (per-minute budgets, schedules' ticks) reads it: the system's clock in
 * every node, one the test moves in tests (test/helpers/clock.ts), so no test waits for a minute to
 * turn.
 */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
