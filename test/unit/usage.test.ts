import { windowOf } from "../../services/analytics/analytics.logic";
import { Meter } from "../../services/gateway/meter";
import { bucketOf, emptyHistogram, LATENCY_BOUNDS_MS, quantileOf } from "../../shared/usage";

describe("latency histograms", () => {
  it("give p50 and p95 within one bucket of the true quantiles", () => {
    let seed = 7;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let round = 0; round < 50; round += 1) {
      const values = Array.from({ length: 1 + Math.floor(random() * 500) }, () => random() ** 3 * 2000);
      const hist = emptyHistogram();
      for (const v of values) hist[bucketOf(v)] += 1;
      const sorted = [...values].sort((a, b) => a - b);
      for (const q of [0.5, 0.95]) {
        const truth = sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)];
        const bound = quantileOf(hist, q)!;
        const i = LATENCY_BOUNDS_MS.indexOf(bound as (typeof LATENCY_BOUNDS_MS)[number]);
        // The true value lies in the reported bucket: at most its upper bound, above the one before.
        expect(truth).toBeLessThanOrEqual(bound);
        expect(truth).toBeGreaterThan(i === 0 ? 0 : LATENCY_BOUNDS_MS[i - 1]);
      }
    }
    expect(quantileOf(emptyHistogram(), 0.5)).toBeNull();
  });
});

describe("the gateway's meter", () => {
  it("sums requests into rows per minute and dimension, and keeps a batch until it is acknowledged", () => {
    const meter = new Meter(3);
    const base = { org_id: "org_1", environment: "live" as const, key_id: "key_1", method: "GET", route: "/events" };
    meter.record({ ...base, at: 60_000 * 10 + 5, status: 200, latency_ms: 1.5 });
    meter.record({ ...base, at: 60_000 * 10 + 9, status: 200, latency_ms: 12 });
    meter.record({ ...base, at: 60_000 * 10 + 9, status: 404, latency_ms: 3 });
    meter.record({ ...base, at: 60_000 * 11, status: 200, latency_ms: 1 });
    const [batch] = meter.batches();
    expect(batch.rows.map((r) => [r.minute, r.status, r.count, r.errors])).toEqual([
      [600_000, 200, 2, 0],
      [600_000, 404, 1, 1],
      [660_000, 200, 1, 0],
    ]);
    expect(batch.rows[0].hist[bucketOf(1.5)]).toBe(1);
    expect(meter.batches().map((b) => b.batch_id)).toEqual([batch.batch_id]);
    meter.acknowledged(batch.batch_id);
    expect(meter.batches()).toEqual([]);
    for (let i = 0; i < 5; i += 1) {
      meter.record({ ...base, at: i, status: 200, latency_ms: 1 });
      meter.batches();
    }
    expect(meter.backlog).toBe(3);
  });
});

describe("analytics windows", () => {
  const now = Date.parse("2026-11-23T10:30:00Z");
  it("defaults to the last day (hours) or 30 days (days), ending now", () => {
    expect(windowOf(undefined, undefined, "hour", now)).toEqual({ from: now - 86_400_000, to: now });
    expect(windowOf(undefined, undefined, "day", now)).toEqual({ from: now - 30 * 86_400_000, to: now });
    expect(windowOf("2026-11-01", "2026-11-02T00:00:00+01:00", "hour", now)).toEqual({
      from: Date.parse("2026-11-01T00:00:00Z"),
      to: Date.parse("2026-11-01T23:00:00Z"),
    });
  });
  it.each([
    ["2026-11-02", "2026-11-01", "from"],
    ["2026-01-01", "2026-06-01", "from"],
    ["11/01/2026", undefined, "from"],
    [undefined, "2026-11-01T10:00", "to"],
  ])("refuses from=%s to=%s naming %s", (from, to, param) => {
    expect(() => windowOf(from, to, "hour", now)).toThrow(expect.objectContaining({ data: expect.objectContaining({ param }) }));
  });
});
