import { Meter } from "../../../../services/gateway/meter";
import { bucketOf } from "../../../../shared/records/usage";

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
