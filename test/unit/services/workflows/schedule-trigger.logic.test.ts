import fc from "fast-check";
import { ApiError } from "../../../../shared/errors";
import type { ScheduleTrigger } from "../../../../shared/api/wire";
import { checkScheduleTrigger, countTicks, nextTick, ticksIn } from "../../../../services/workflows/schedule-trigger.logic";

const cron = (expression: string, timezone = "Europe/Berlin"): ScheduleTrigger =>
  checkScheduleTrigger({ type: "schedule", cron: expression, timezone });
const at = (iso: string): number => Date.parse(iso);
const berlin = (ms: number): string => new Date(ms).toLocaleString("sv", { timeZone: "Europe/Berlin" });
/** The ticks of a day (UTC midnight to midnight), as Berlin wall-clock times. */
const dayOf = (trigger: ScheduleTrigger, fromIso: string, toIso: string): string[] =>
  ticksIn(trigger, at(fromIso), at(toIso), 1000).ticks.map(berlin);

function refusal(raw: Record<string, unknown>): { param: unknown; message: string } {
  try {
    checkScheduleTrigger({ type: "schedule", ...raw });
  } catch (err) {
    if (err instanceof ApiError) return { param: err.data?.param, message: err.message };
    throw err;
  }
  throw new Error(`accepted ${JSON.stringify(raw)}`);
}

describe("schedule triggers, checked when written", () => {
  it("names a field it does not take by its path, whatever its name", () => {
    expect(refusal({ every_ms: 60_000, extra: 1 }).param).toBe("trigger.extra");
    expect(refusal({ every_ms: 60_000, "a b": 1 }).param).toBe('trigger["a b"]');
  });

  it("fills the defaults: overlap skip, an empty input, a catch-up window of one hour, UTC", () => {
    expect(checkScheduleTrigger({ type: "schedule", cron: "0 8 * * 1-5" })).toEqual({
      type: "schedule",
      cron: "0 8 * * 1-5",
      timezone: "UTC",
      overlap: "skip",
      input: {},
      catchup_window_ms: 3_600_000,
    });
    expect(checkScheduleTrigger({ type: "schedule", every_ms: 900_000, overlap: "buffer_one" })).toMatchObject({
      every_ms: 900_000,
      overlap: "buffer_one",
    });
  });

  it.each([
    [{ cron: "61 * * * *" }, "trigger.cron", /minute: 61/],
    [{ cron: "* * * *" }, "trigger.cron", /5 fields/],
    [{ cron: "0 0 30 2 *" }, "trigger.cron", /never fires/],
    [{ cron: 5 }, "trigger.cron", /cron expression/],
    [{ cron: "0 8 * * *", timezone: "Mars/Olympus" }, "trigger.timezone", /Mars\/Olympus/],
    [{ every_ms: 999 }, "trigger.every_ms", /from 1000/],
    [{ every_ms: 1500.5 }, "trigger.every_ms", /whole number/],
    [{ every_ms: 1000, timezone: "UTC" }, "trigger.timezone", /every_ms/],
    [{}, "trigger.cron", /either/],
    [{ cron: "* * * * *", every_ms: 1000 }, "trigger.cron", /either/],
    [{ every_ms: 1000, overlap: "queue" }, "trigger.overlap", /"skip", "allow", "buffer_one"/],
    [{ every_ms: 1000, catchup_window_ms: 5 }, "trigger.catchup_window_ms", /10000/],
    [{ every_ms: 1000, input: [] }, "trigger.input", /object/],
    [{ every_ms: 1000, at: "noon" }, "trigger.at", /no field "at"/],
  ])("refuses %j naming %s", (raw, param, message) => {
    const got = refusal(raw);
    expect(got.param).toBe(param);
    expect(got.message).toMatch(message);
  });

  it("refuses any every_ms under a second or over a year, and takes any in between", () => {
    fc.assert(
      fc.property(fc.integer({ min: -1e12, max: 1e12 }), (every) => {
        const ok = every >= 1000 && every <= 366 * 86_400_000;
        if (ok) expect(checkScheduleTrigger({ type: "schedule", every_ms: every })).toMatchObject({ every_ms: every });
        else expect(refusal({ every_ms: every }).param).toBe("trigger.every_ms");
      }),
    );
  });
});

describe("ticks", () => {
  it("every_ms ticks at whole multiples since the epoch, strictly after the time given", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1000, max: 86_400_000 }), fc.integer({ min: 0, max: 4e12 }), (every, after) => {
        const trigger = checkScheduleTrigger({ type: "schedule", every_ms: every });
        const next = nextTick(trigger, after) as number;
        expect(next % every).toBe(0);
        expect(next).toBeGreaterThan(after);
        expect(next - after).toBeLessThanOrEqual(every);
      }),
    );
  });

  it("counts a gap exactly for every_ms, and up to the cap for a cron", () => {
    const every = checkScheduleTrigger({ type: "schedule", every_ms: 1000 });
    expect(countTicks(every, 1000, 5000, 10)).toEqual({ count: 4, last: 4000 });
    expect(countTicks(every, 1001, 5001, 10)).toEqual({ count: 4, last: 5000 });
    expect(countTicks(every, 0, 3_600_000, 10)).toEqual({ count: 3600, last: 3_599_000 });
    const minutely = cron("* * * * *", "UTC");
    expect(countTicks(minutely, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:10:00Z"), 100).count).toBe(10);
    expect(countTicks(minutely, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"), 100)).toEqual({
      count: 100,
      last: at("2026-01-01T23:59:00Z"),
    });
  });

  it("reads a cron in its time zone: 08:00 in Berlin is 07:00 UTC in winter, 06:00 in summer", () => {
    const weekdays = cron("0 8 * * 1-5");
    expect(new Date(nextTick(weekdays, at("2026-03-27T00:00:00Z")) as number).toISOString()).toBe("2026-03-27T07:00:00.000Z");
    // Friday, then the weekend, then Monday after the change to summer time.
    expect(new Date(nextTick(weekdays, at("2026-03-27T07:00:00Z")) as number).toISOString()).toBe("2026-03-30T06:00:00.000Z");
  });
});

describe("a cron across Berlin's daylight-saving changes (croner's rules)", () => {
  // 2026-03-29: 02:00 CET becomes 03:00 CEST, so 02:30 does not exist that day.
  // 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:00 to 02:59 happens twice.
  it("a fixed-time job at 02:30 runs once on each day: at 03:00 on the spring day, on the first 02:30 in autumn", () => {
    const daily = cron("30 2 * * *");
    expect(dayOf(daily, "2026-03-27T12:00:00Z", "2026-03-31T00:00:00Z")).toEqual([
      "2026-03-28 02:30:00",
      "2026-03-29 03:00:00",
      "2026-03-30 02:30:00",
    ]);
    const autumn = ticksIn(daily, at("2026-10-23T12:00:00Z"), at("2026-10-27T00:00:00Z"), 10).ticks;
    expect(autumn.map(berlin)).toEqual(["2026-10-24 02:30:00", "2026-10-25 02:30:00", "2026-10-26 02:30:00"]);
    // The first 02:30 of the 25th: still summer time (UTC+2).
    expect(new Date(autumn[1]).toISOString()).toBe("2026-10-25T00:30:00.000Z");
  });

  it("an interval job skips the hour that does not exist and runs on both passes of the repeated one", () => {
    const halfHourly = cron("*/30 * * * *");
    const spring = ticksIn(halfHourly, at("2026-03-29T00:00:00Z"), at("2026-03-29T02:00:00Z"), 10).ticks;
    expect(spring.map(berlin)).toEqual(["2026-03-29 01:00:00", "2026-03-29 01:30:00", "2026-03-29 03:00:00", "2026-03-29 03:30:00"]);
    const autumn = ticksIn(halfHourly, at("2026-10-24T23:30:00Z"), at("2026-10-25T02:00:00Z"), 10).ticks;
    expect(autumn.map(berlin)).toEqual([
      "2026-10-25 01:30:00",
      "2026-10-25 02:00:00",
      "2026-10-25 02:30:00",
      "2026-10-25 02:00:00",
      "2026-10-25 02:30:00",
    ]);
    // Real time moves on evenly: every half hour, no instant twice, none lost.
    expect(autumn.slice(1).map((t, i) => t - autumn[i])).toEqual([1_800_000, 1_800_000, 1_800_000, 1_800_000]);
  });

  it("every tick of a year in Berlin is later than the one before, and a daily job has one tick a day", () => {
    const daily = cron("30 2 * * *");
    const { ticks } = ticksIn(daily, at("2026-01-01T00:00:00Z"), at("2027-01-01T00:00:00Z"), 400);
    expect(ticks.length).toBe(365);
    const days = new Set(ticks.map((t) => berlin(t).slice(0, 10)));
    expect(days.size).toBe(365);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]).toBeGreaterThan(ticks[i - 1]);
  });
});
