import type { ServiceBroker } from "moleculer";

/** What a failure is, for a log line: its stable code (`storage_unavailable`, …) or its name, and message. */
export function describeFailure(err: unknown): { kind: string; message: string } {
  const e = (err ?? {}) as { type?: unknown; name?: unknown; message?: unknown };
  const kind = typeof e.type === "string" && e.type !== "" ? e.type : typeof e.name === "string" && e.name !== "" ? e.name : "Error";
  return { kind, message: typeof e.message === "string" ? e.message : String(err) };
}

/** A kind of failure warned about is not warned about again within this long (a flapping store). */
const QUIET_MS = 60_000;

/**
 * Logs a background job's failures once per kind, not once per item: the first failure of an
 * operation with a given error kind (e.g. `claiming deliveries` / `storage_unavailable`) is a
 * warning, the ones after it are only counted, and when the operation works again one info line says
 * how many there were and for how long. A streak that starts within a minute of the last warning of
 * its kind is not warned about again (a store failing on and off). A full disk then costs a few log
 * lines, not one per delivery, run or poll.
 */
export class FailureLog {
  private readonly failing = new Map<string, { kind: string; since: number; count: number; warned: boolean }>();
  private readonly lastWarned = new Map<string, number>();

  constructor(private readonly logger: ServiceBroker["logger"]) {}

  /** `operation` failed with `err`; `after` says what happens next (logged with the first one). */
  failed(operation: string, err: unknown, after?: string): void {
    const { kind, message } = describeFailure(err);
    const key = `${operation}\n${kind}`;
    const known = this.failing.get(key);
    if (known) {
      known.count += 1;
      return;
    }
    const now = Date.now();
    const warned = now - (this.lastWarned.get(key) ?? -Infinity) >= QUIET_MS;
    this.failing.set(key, { kind, since: now, count: 1, warned });
    if (!warned) return;
    this.lastWarned.set(key, now);
    this.logger.warn(
      `${operation} failed (${kind}): ${message}${after ? `; ${after}` : ""}; further ${kind} failures of it are counted, not logged, until it works again`,
    );
  }

  /** `operation` worked: ends its failure streaks, with one line each (info if it was warned about). */
  ok(operation: string): void {
    if (this.failing.size === 0) return;
    for (const [key, streak] of this.failing) {
      if (!key.startsWith(`${operation}\n`)) continue;
      this.failing.delete(key);
      this.logger[streak.warned ? "info" : "debug"](
        `${operation} works again after ${streak.count} ${streak.kind} failure(s) over ${Date.now() - streak.since} ms`,
      );
    }
  }
}
