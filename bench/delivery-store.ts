import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServiceBroker } from "moleculer";
import { freshDelivery, outcomeOf, settledDelivery } from "../services/webhook-dispatcher/dispatcher.logic";
import { DELIVERIES, type Attempt } from "../shared/records/deliveries";
import { EventConsumer } from "../shared/runtime/event-consumer";
import { eventDoc, EVENTS, type Marker } from "../shared/records/events";
import { SqliteStore } from "../shared/storage/sqlite";
import { ALL_TENANTS, openCollection } from "../shared/storage/types";

/**
 * The ceiling the embedded store puts on a single process's drain: the store work of delivering a
 * backlog of `events` events to one webhook, with no HTTP at all, in a process of its own. It is the
 * work the single process does for each event and delivery, through the same code: both services'
 * sweeps of the event log (the dispatcher's and the workflows service's, whose handler here finds
 * no workflow to start), the batch's look-up of deliveries already stored, each delivery inserted
 * once already settled by its first attempt (a 200), and both markers
 * unset. Everything is let in flight at once, so the store's group commit takes the largest batches
 * it can: an upper bound.
 *
 *   node dist/bench/delivery-store.js <events>       → {"deliveries": n, "ms": t}
 */
const TENANT = { org_id: "org_bench", environment: "live" } as const;
const logger = { warn: (...args: unknown[]) => console.error(...args) } as unknown as ServiceBroker["logger"];

async function main(): Promise<void> {
  const count = Number(process.argv[2]);
  const dir = mkdtempSync(join(tmpdir(), "wfp-bench-store-"));
  const store = new SqliteStore(dir);
  try {
    const events = openCollection(store, EVENTS);
    const deliveries = openCollection(store, DELIVERIES);
    // What the events service's `unmark` does, without the broker call in front of it.
    const unmark = async (marker: Marker, ids: string[]) => {
      await events.updateMany(ALL_TENANTS, { id: { $in: ids } }, { $unset: { [marker]: true } });
    };
    // Stored past the consumers' grace period, so the first sweeps take them; a millisecond apart,
    // as a steady stream is (thousands stored in one millisecond would share one key of the marker
    // indexes, and each unset would scan them).
    const storedAt = Date.now() - 60_000 - count;
    for (let i = 0; i < count; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, count - i) }, (_, j) =>
          events.insert(eventDoc({ ...TENANT, type: "bench.test", data: { i: i + j }, source: "api" }, storedAt + i + j)),
        ),
      );
    }

    let delivered = 0;
    const dispatcher = new EventConsumer(
      events,
      "undispatched_since",
      async (tenant, batch) => {
        const now = Date.now();
        const at = new Date(now).toISOString();
        const stored = await deliveries.find(tenant, { event_id: { $in: batch.map((e) => e.id) } });
        if (stored.length > 0) throw new Error(`${stored.length} deliveries stored before their fan-out`);
        await Promise.all(
          batch.map(async (event) => {
            const delivery = freshDelivery(tenant, event, "wh_bench", at);
            const attempt: Attempt = { number: 1, at: new Date().toISOString(), status_code: 200, duration_ms: 1, error: null };
            const done = Date.now();
            await deliveries.insert(settledDelivery(delivery, outcomeOf(delivery, attempt, [], done), attempt, done));
            delivered += 1;
          }),
        );
        return new Set<string>();
      },
      logger,
      unmark,
    );
    const workflows = new EventConsumer(events, "untriggered_since", async () => new Set<string>(), logger, unmark);

    const started = performance.now();
    await Promise.all([dispatcher.sweep(), workflows.sweep()]);
    const ms = performance.now() - started;
    if (delivered !== count) throw new Error(`delivered ${delivered} of ${count}`);
    process.stdout.write(JSON.stringify({ deliveries: delivered, ms }));
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
