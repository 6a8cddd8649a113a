import { Cron } from "croner";
import { ApiError, echo, invalidParam, notOneOf } from "../../shared/errors";
import { formatPath } from "../../shared/api/json-limits";
import type { ScheduleTrigger } from "../../shared/api/wire";

/**
 * Schedule triggers (docs/workflows/README.md#schedule-trigger): a cron expression read in an IANA
 * time zone by croner, or a fixed period. Ticks are instants (ms since the epoch) every node
 * computes alike, so a tick's run key (`<workflow_id>/schedule/<ms>`) is the same wherever it is
 * started. Daylight-saving changes are croner's: a fixed-time job (`30 2 * * *`) runs once on the
 * day 02:30 repeats and at 03:00 on the day it does not exist; an interval job (`*\/30 * * * *`)
 * runs on both passes of a repeated hour and skips the missing one.
 */
export const EVERY_MS_MIN = 1_000;
export const EVERY_MS_MAX = 366 * 24 * 60 * 60 * 1000;
export const CATCHUP_WINDOW_DEFAULT_MS = 60 * 60 * 1000;
export const CATCHUP_WINDOW_MIN_MS = 10_000;
export const CATCHUP_WINDOW_MAX_MS = 7 * 24 * 60 * 60 * 1000;
export const CRON_MAX_CHARS = 200;
export const SCHEDULE_INPUT_MAX_BYTES = 64 * 1024;
export const OVERLAPS = ["skip", "allow", "buffer_one"] as const;
const FIELDS = ["type", "cron", "timezone", "every_ms", "overlap", "input", "catchup_window_ms"];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function validZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const cronOf = (expression: string, timezone: string): Cron => new Cron(expression, { timezone, paused: true, mode: "5-or-6-parts" });

/** The schedule trigger, checked and completed with its defaults; a 400 names the field and what is wrong. */
export function checkScheduleTrigger(raw: Record<string, unknown>): ScheduleTrigger {
  const unknown = Object.keys(raw).find((k) => !FIELDS.includes(k));
  if (unknown !== undefined)
    throw new ApiError("parameter_unknown", `a schedule trigger has no field ${JSON.stringify(unknown)} (it takes ${FIELDS.join(", ")})`, {
      param: formatPath([unknown], "trigger"),
    });
  const overlap = raw.overlap ?? "skip";
  if (!(OVERLAPS as readonly unknown[]).includes(overlap)) throw notOneOf("trigger.overlap", [...OVERLAPS], overlap);
  const input = raw.input ?? {};
  if (!isObject(input)) throw invalidParam("trigger.input", "trigger.input must be an object: the input of every scheduled run");
  if (Buffer.byteLength(JSON.stringify(input)) > SCHEDULE_INPUT_MAX_BYTES)
    throw invalidParam("trigger.input", `trigger.input is over ${SCHEDULE_INPUT_MAX_BYTES} bytes as JSON`);
  const window = raw.catchup_window_ms ?? CATCHUP_WINDOW_DEFAULT_MS;
  if (typeof window !== "number" || !Number.isInteger(window) || window < CATCHUP_WINDOW_MIN_MS || window > CATCHUP_WINDOW_MAX_MS)
    throw invalidParam(
      "trigger.catchup_window_ms",
      `trigger.catchup_window_ms must be a whole number of ms from ${CATCHUP_WINDOW_MIN_MS} to ${CATCHUP_WINDOW_MAX_MS} (7 days); received ${echo(window)}`,
    );
  const common = { type: "schedule" as const, overlap: overlap as ScheduleTrigger["overlap"], input, catchup_window_ms: window };
  if ((raw.cron === undefined) === (raw.every_ms === undefined))
    throw invalidParam("trigger.cron", 'a schedule trigger takes either "cron" (with an optional "timezone") or "every_ms"');
  if (raw.every_ms !== undefined) {
    if (raw.timezone !== undefined) throw invalidParam("trigger.timezone", "trigger.timezone goes with a cron, not with every_ms");
    const every = raw.every_ms;
    if (typeof every !== "number" || !Number.isInteger(every) || every < EVERY_MS_MIN || every > EVERY_MS_MAX)
      throw invalidParam(
        "trigger.every_ms",
        `trigger.every_ms must be a whole number of ms from ${EVERY_MS_MIN} to ${EVERY_MS_MAX} (366 days); received ${echo(every)}`,
      );
    return { ...common, every_ms: every };
  }
  const timezone = raw.timezone ?? "UTC";
  if (typeof timezone !== "string" || timezone.length > 64 || !validZone(timezone))
    throw invalidParam(
      "trigger.timezone",
      `trigger.timezone must be an IANA time zone such as "Europe/Berlin" or "UTC"; received ${echo(timezone)}`,
    );
  const cron = raw.cron;
  if (typeof cron !== "string" || cron.trim().length === 0 || cron.length > CRON_MAX_CHARS)
    throw invalidParam(
      "trigger.cron",
      `trigger.cron must be a cron expression of at most ${CRON_MAX_CHARS} characters, such as "0 8 * * 1-5"`,
    );
  let next: Date | null;
  try {
    next = cronOf(cron.trim(), timezone).nextRun(new Date(0));
  } catch (err) {
    const why = (err as Error).message.replace(/^CronPattern: /, "");
    throw invalidParam("trigger.cron", `trigger.cron is not a cron expression of 5 fields (or 6, seconds first): ${why}`);
  }
  if (next === null) throw invalidParam("trigger.cron", `trigger.cron ${JSON.stringify(cron)} never fires`);
  return { ...common, cron: cron.trim(), timezone };
}

/** The first tick strictly after `afterMs`, or null when the schedule has none. `every_ms` ticks at whole multiples since the epoch. */
export function nextTick(trigger: ScheduleTrigger, afterMs: number): number | null {
  if ("every_ms" in trigger) return Math.floor(afterMs / trigger.every_ms) * trigger.every_ms + trigger.every_ms;
  const next = cronOf(trigger.cron, trigger.timezone).nextRun(new Date(afterMs));
  return next ? next.getTime() : null;
}

/** The ticks in [fromMs, toMs), at most `max` of them; `more` when there are others after those. */
export function ticksIn(trigger: ScheduleTrigger, fromMs: number, toMs: number, max: number): { ticks: number[]; more: boolean } {
  const ticks: number[] = [];
  for (let at = nextTick(trigger, fromMs - 1); at !== null && at < toMs; at = nextTick(trigger, at)) {
    if (ticks.length === max) return { ticks, more: true };
    ticks.push(at);
  }
  return { ticks, more: false };
}

/**
 * How many ticks fall in [fromMs, toMs), counted up to `cap` (a cron is walked tick by tick), and
 * the last of them (null: none).
 */
export function countTicks(trigger: ScheduleTrigger, fromMs: number, toMs: number, cap: number): { count: number; last: number | null } {
  if (toMs <= fromMs) return { count: 0, last: null };
  if ("every_ms" in trigger) {
    const first = Math.ceil(fromMs / trigger.every_ms);
    const last = Math.ceil(toMs / trigger.every_ms) - 1;
    return last < first ? { count: 0, last: null } : { count: last - first + 1, last: last * trigger.every_ms };
  }
  const { ticks, more } = ticksIn(trigger, fromMs, toMs, cap);
  if (!more) return { count: ticks.length, last: ticks.at(-1) ?? null };
  const previous = cronOf(trigger.cron, trigger.timezone).previousRuns(1, new Date(toMs))[0];
  return { count: cap, last: previous ? previous.getTime() : ticks[ticks.length - 1] };
}
