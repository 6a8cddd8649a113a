import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventConsumer, type SweepShare } from "../../../../shared/runtime/event-consumer";
import { eventDoc, EVENTS, type EventDoc } from "../../../../shared/records/events";
import { SqliteStore } from "../../../../shared/storage/sqlite";
import { ALL_TENANTS, openCollection, type Collection } from "../../../../shared/storage/types";

describe("EventConsumer's sweep, shared among nodes", () => {
  let dir: string;
  let store: SqliteStore;
  let events: Collection<EventDoc>;
  const logger = { warn: () => undefined } as unknown as ConstructorParameters<typeof EventConsumer>[3];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "wfp-consumer-"));
    store = new SqliteStore(dir);
    events = openCollection(store, EVENTS);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** `n` events marked 10 s ago (past the sweep's grace period), in two tenants. */
  async function marked(n: number): Promise<EventDoc[]> {
    const stored: EventDoc[] = [];
    for (let i = 0; i < n; i++) {
      const doc = eventDoc(
        { org_id: i % 2 ? "org_a" : "org_b", environment: "live", type: "t.x", data: { i }, source: "api" },
        Date.now() - 10_000 + i,
      );
      stored.push(await events.insert(doc));
    }
    return stored;
  }

  /**
   * Sweeps once with `share`; answers the events handed to the handler, the ids unmarked and how
   * many reads of the event log the sweep made.
   */
  async function sweep(share: SweepShare | undefined) {
    const handled: EventDoc[] = [];
    const unmarked: string[] = [];
    let reads = 0;
    const counted = new Proxy(events, {
      get(target, name: keyof Collection<EventDoc>) {
        const value = target[name];
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          if (name === "find" || name === "pluck") reads += 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const consumer = new EventConsumer(
      counted,
      "undispatched_since",
      (_tenant, batch) => {
        handled.push(...batch);
        return Promise.resolve(new Set<string>());
      },
      logger,
      (_marker, ids) => {
        unmarked.push(...ids);
        return Promise.resolve();
      },
      share,
    );
    await consumer.sweep();
    return { handled, unmarked, reads };
  }

  it("hands over only this node's share, as whole documents, and leaves the rest marked", async () => {
    const stored = await marked(30);
    const mine = new Set(stored.filter((_, i) => i % 3 === 0).map((e) => e.id));
    const { handled, unmarked } = await sweep(() => (id) => mine.has(id));
    expect(new Set(handled.map((e) => e.id))).toEqual(mine);
    // The documents as stored, not only the ids the sweep read first.
    const byId = new Map(stored.map((e) => [e.id, e]));
    for (const e of handled) expect(e).toEqual(byId.get(e.id));
    expect(new Set(unmarked)).toEqual(mine);
    // Each tenant's oldest first, as the marker orders them.
    for (const org of ["org_a", "org_b"]) {
      const times = handled.filter((e) => e.org_id === org).map((e) => e.undispatched_since!);
      expect(times).toEqual([...times].sort((a, b) => a - b));
    }
  });

  it("hands over every marked event when the share is all of them, and none while it is none", async () => {
    const stored = await marked(12);
    expect((await sweep(() => () => false)).handled).toEqual([]);
    const all = await sweep(undefined);
    expect(new Set(all.handled.map((e) => e.id))).toEqual(new Set(stored.map((e) => e.id)));
    expect(all.unmarked).toHaveLength(12);
    expect(await events.count(ALL_TENANTS, {})).toBe(12);
  });

  it("stops at once, reading nothing, while the node cannot take its share (its view of its peers settling)", async () => {
    const stored = await marked(1200);
    const waiting = await sweep(() => false);
    expect(waiting).toEqual({ handled: [], unmarked: [], reads: 0 });
    // The view changes after the first batch: the sweep stops there, that batch handled and unmarked.
    let asked = 0;
    const first = await sweep(() => (asked++ === 0 ? null : false));
    expect(first.reads).toBe(1);
    // The 500 oldest (by marker), each tenant's in order.
    expect(new Set(first.handled.map((e) => e.id))).toEqual(new Set(stored.slice(0, 500).map((e) => e.id)));
    expect(new Set(first.unmarked)).toEqual(new Set(first.handled.map((e) => e.id)));
    // Once it can take its share again, a sweep reads on to the end (nothing here was really unmarked).
    const next = await sweep(undefined);
    expect(next.handled).toHaveLength(stored.length);
    expect(next.reads).toBe(3);
  });
});
