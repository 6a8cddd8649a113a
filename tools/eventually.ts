/**
 * Waiting in tests, benchmarks and tools: on a condition, never on a guessed time. `eventually`
 * asks `check` until it answers something truthy (and returns that), or the time runs out (and
 * throws, naming what was awaited and the last error); `eventuallyValue` does the same with a value
 * and a test of it, and names the last value it saw when the time runs out.
 */
export async function eventually<T>(what: string, check: () => Promise<T> | T, timeoutMs = 20_000, everyMs = 50): Promise<T> {
  let lastError: unknown;
  const value = await poll(
    async () => {
      try {
        const v = await check();
        return v ? { v } : undefined;
      } catch (err) {
        lastError = err;
        return undefined;
      }
    },
    timeoutMs,
    everyMs,
  );
  if (value) return value.v;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
}

export async function eventuallyValue<T>(
  what: string,
  get: () => Promise<T>,
  accept: (value: T) => boolean,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> {
  let last: T | undefined;
  const value = await poll(
    async () => {
      last = await get();
      return accept(last) ? { v: last } : undefined;
    },
    timeoutMs,
    everyMs,
  );
  if (value) return value.v;
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)?.slice(0, 2000)}`);
}

/**
 * A fixed wait, for the few tests whose subject is real time passing (a back-off that must hold
 * off, a time-out that must fire): the reason is part of the call, so none is a guess in disguise.
 */
export function realTimePasses(ms: number, why: string): Promise<void> {
  if (!why) throw new Error("realTimePasses needs the reason real time must pass");
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function poll<R>(attempt: () => Promise<R | undefined>, timeoutMs: number, everyMs: number): Promise<R | undefined> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const got = await attempt();
    if (got !== undefined) return got;
    if (Date.now() >= until) return undefined;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
