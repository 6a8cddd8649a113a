import { bucketOf, emptyHistogram, LATENCY_BOUNDS_MS, quantileOf } from "../../../../shared/records/usage";

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
