import { ApiCallError } from "./http";
import type { Output } from "./output";

/**
 * The loop of `events tail` and `deliveries tail`: one poll after another until Ctrl-C. A poll
 * changes its state item by item as it prints, so a poll that fails half-way resumes where it
 * stopped: nothing printed twice, nothing skipped. Refusals for load (429) wait as long as
 * Retry-After says; an unreachable or failing API (a restart) is asked again after a growing wait.
 */
export const POLL_MS = 1000;
/** Requests per second a tail aims to stay under, well inside the default limit of 100 per key. */
const REQUESTS_PER_SECOND = 20;
const BACKOFF_MAX_MS = 30_000;

export interface PollOptions {
  out: Output;
  /** One poll; answers how many requests it made. */
  poll(): Promise<number>;
  /** An error this tail can absorb (a deleted webhook): answers true when it did. */
  absorb?(err: ApiCallError): boolean;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long to wait after a failed poll, or undefined when the error is not one to wait out. */
export function waitAfter(err: unknown, failures: number): number | undefined {
  if (!(err instanceof ApiCallError)) return undefined;
  if (err.status === 429) return Math.max(1, err.retryAfter ?? 1) * 1000;
  if (err.status === 0 || err.status >= 500) {
    const backoff = Math.min(BACKOFF_MAX_MS, 1000 * 2 ** Math.min(failures - 1, 5));
    return err.retryAfter !== undefined ? Math.max(err.retryAfter * 1000, backoff) : backoff;
  }
  return undefined;
}

export async function pollUntilStopped({ out, poll, absorb }: PollOptions): Promise<void> {
  let stop = false;
  process.once("SIGINT", () => (stop = true));
  process.once("SIGTERM", () => (stop = true));
  let failures = 0;
  while (!stop) {
    let requests = 1;
    try {
      requests = await poll();
      if (failures > 0) out.info("resumed");
      failures = 0;
    } catch (err) {
      if (err instanceof ApiCallError && absorb?.(err)) continue;
      const wait = waitAfter(err, ++failures);
      if (wait === undefined) throw err;
      out.info(`${(err as Error).message}; asking again in ${Math.round(wait / 100) / 10} s`);
      await sleep(wait);
      continue;
    }
    await sleep(Math.max(POLL_MS, (requests * 1000) / REQUESTS_PER_SECOND));
  }
}
