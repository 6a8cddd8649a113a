import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { usageBuckets } from "../../services/analytics/analytics.logic";
import { Tiers, tierSizes, type StoredRow, type TierState } from "../../services/analytics/tiers";
import { SqliteStore } from "../../shared/storage/sqlite";

const { minute: MINUTE, hour: HOUR, day: DAY } = tierSizes;
const A = { org_id: "org_a", environment: "live" } as const;

describe("usage tiers", () => {
  let dir: string;
  let store: SqliteStore;
  let tiers: Tiers;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "wfp-tiers-"));
    store = new SqliteStore(dir);
    const rows = (name: string) =>
      store.collection<StoredRow>(name, [{ fields: { org_id: 1, environment: 1, start: 1 } }, { fields: { start: 1 } }]);
    tiers = new Tiers(
      [
        { name: "minute", size: MINUTE, rows: rows("usage_minutes"), keepMs: 2 * DAY },
        { name: "hour", size: HOUR, rows: rows("usage_hours"), keepMs: 90 * DAY },
        { name: "day", size: DAY, rows: rows("usage_days"), keepMs: 730 * DAY },
      ],
      store.collection<TierState>("usage_tiers"),
    );
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers folded periods from hour and day rows, not from every minute row, with the same buckets", async () => {
    const now = Date.now();
    const day = now - (now % DAY) - 3 * DAY;
    const minutes = store.collection<StoredRow>("usage_minutes");
    // Every minute of a whole day, and of the next day's first two hours: one request each.
    let n = 0;
    for (let t = day; t < day + DAY + 2 * HOUR; t += MINUTE) {
      const hist = new Array(25).fill(0);
      hist[3] = 1;
      await minutes.insert({
        id: `b.${n++}`,
        ...A,
        start: t,
        key_id: "key_1",
        method: "GET",
        route: "/events",
        status: 200,
        count: 1,
        errors: 0,
        latency_ms_sum: 4,
        hist,
      });
    }
    const from = day - 6 * HOUR;
    const to = day + DAY + 2 * HOUR;
    const ask = async (granularity: "hour" | "day") => {
      const rows = await tiers.rowsFor(A, from, to, granularity);
      return { read: rows.length, buckets: usageBuckets(rows, { from, to }, granularity) };
    };
    const before = { hour: await ask("hour"), day: await ask("day") };
    expect(before.hour.read).toBe(n);

    await tiers.maintain(now);
    const after = { hour: await ask("hour"), day: await ask("day") };
    expect(after.hour.buckets).toEqual(before.hour.buckets);
    expect(after.day.buckets).toEqual(before.day.buckets);
    // 26 hour rows instead of 1,560 minute rows; by day, the whole day is one row.
    expect(after.hour.read).toBe(26);
    expect(after.day.read).toBe(1 + 2);
    expect(before.day.buckets.reduce((s, b) => s + b.count, 0)).toBe(n);
  }, 60_000);
});
