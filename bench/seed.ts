import { monotonicFactory } from "ulid";
import { settlement } from "../services/webhook-dispatcher/dispatcher.logic";
import { DELIVERIES, type DeliveryDoc } from "../shared/records/deliveries";
import { EVENTS, type EventDoc } from "../shared/records/events";
import { applyUpdate } from "../shared/storage/update";
import { SqliteStore } from "../shared/storage/sqlite";
import { openCollection } from "../shared/storage/types";

/**
 * Grows a data directory's event log for the scale bench, straight through the embedded store (the
 * API would take hours for a million): `count` events of one tenant spread over the last `days`
 * days, each already fanned out, with its delivery to `webhook` settled after one 200 attempt; as
 * the platform stores them, through the same collection definitions (so the same indexes).
 *
 *   node dist/bench/seed.js <dir> <org_id> <webhook_id> <count> <days>   → {"events": n, "ms": t}
 */
const IN_FLIGHT = 2048;

async function main(): Promise<void> {
  const [dir, org_id, webhook_id, countArg, daysArg] = process.argv.slice(2);
  const count = Number(countArg);
  const spanMs = Number(daysArg) * 86_400_000;
  const store = new SqliteStore(dir);
  const events = openCollection(store, EVENTS);
  const deliveries = openCollection(store, DELIVERIES);
  const ulid = monotonicFactory();
  const started = performance.now();
  const end = Date.now() - 60_000;
  const types = ["order.created", "order.paid", "invoice.sent", "user.signed_up"];
  let next = 0;
  const one = async (i: number) => {
    // Oldest first, evenly over the span, so ids (time-ordered) and times agree.
    const at = end - spanMs + Math.floor((i * spanMs) / count);
    const iso = new Date(at).toISOString();
    const event: EventDoc = {
      id: `evt_${ulid(at).toLowerCase()}`,
      org_id,
      environment: "live",
      type: types[i % types.length],
      data: { n: i, customer: `cus_${i % 1000}`, amount: (i * 37) % 10_000, note: "seeded by bench/seed.ts" },
      source: "api",
      created_at: iso,
    };
    await events.insert(event);
    const delivery = applyUpdate(
      {
        id: `del_${ulid(at).toLowerCase()}`,
        org_id,
        environment: "live",
        webhook_id,
        event_id: event.id,
        event_type: event.type,
        status: "pending",
        attempts: [],
        series_start: 0,
        next_attempt_at: iso,
        created_at: iso,
        updated_at: iso,
      },
      settlement({ status: "succeeded", dueAt: null }, { number: 1, at: iso, status_code: 200, duration_ms: 3, error: null }, at + 3),
    ) as unknown as DeliveryDoc;
    await deliveries.insert(delivery);
  };
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i < count; i = next++) await one(i);
    }),
  );
  await store.close();
  console.log(JSON.stringify({ events: count, ms: Math.round(performance.now() - started) }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
