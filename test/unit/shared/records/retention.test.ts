import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ulid } from "ulid";
import { firstIdAt, prune, PRUNE_BATCH_MAX, retentionCutoff } from "../../../../shared/records/retention";
import { SqliteStore } from "../../../../shared/storage/sqlite";
import { ALL_TENANTS, type Collection, type Doc } from "../../../../shared/storage/types";

const DAY = 24 * 60 * 60 * 1000;

describe("retention ids and cutoffs", () => {
  it("firstIdAt sorts above every id made before that time and at or below every id made from then on", () => {
    const at = Date.parse("2026-10-01T12:00:00.000Z");
    const bound = firstIdAt("evt", at);
    for (let i = 0; i < 200; i++) {
      expect(`evt_${ulid(at - 1 - i * 997).toLowerCase()}` < bound).toBe(true);
      expect(`evt_${ulid(at + i * 997).toLowerCase()}` >= bound).toBe(true);
    }
  });

  it("the cutoff is that many days back", () => {
    expect(retentionCutoff(30, 100 * DAY)).toBe(70 * DAY);
  });
});

interface Item extends Doc {
  state: "done" | "busy";
  at: string;
}

describe("prune", () => {
  let dir: string;
  let store: SqliteStore;
  let items: Collection<Item>;
  const now = Date.parse("2026-11-20T00:00:00.000Z");
  const item = (ms: number, state: Item["state"] = "done"): Item => ({
    id: `evt_${ulid(ms).toLowerCase()}`,
    org_id: "org_1",
    state,
    at: new Date(ms).toISOString(),
  });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "wfp-retention-"));
    store = new SqliteStore(dir);
    items = store.collection<Item>("items", [{ fields: { at: 1 } }]);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("deletes what is old and removable, batch by batch, keeps what is still needed, and says how many went", async () => {
    const old = Array.from({ length: 2 * PRUNE_BATCH_MAX + 37 }, (_, i) =>
      item(now - 40 * DAY + i * 1000, i % 100 === 0 ? "busy" : "done"),
    );
    const young = Array.from({ length: 20 }, (_, i) => item(now - 10 * DAY + i));
    await Promise.all([...old, ...young].map((d) => items.insert(d)));
    const needed = new Set([old[1].id, old[PRUNE_BATCH_MAX + 2].id, old[old.length - 1].id]);
    const asked: unknown[] = [];
    const removed = await prune(
      {
        collection: items,
        field: "id",
        before: firstIdAt("evt", now - 30 * DAY),
        removable: { state: "done" },
        stillNeeded: async (range) => {
          asked.push(range);
          return (await items.find(ALL_TENANTS, { id: range })).filter((d) => needed.has(d.id)).map((d) => d.id);
        },
      },
      { pauseMs: 0 },
    );
    const busy = old.filter((d) => d.state === "busy").length;
    expect(removed).toBe(old.length - busy - needed.size);
    const left = new Set((await items.find(ALL_TENANTS, {})).map((d) => d.id));
    expect(left.size).toBe(young.length + busy + needed.size);
    for (const d of young) expect(left.has(d.id)).toBe(true);
    for (const id of needed) expect(left.has(id)).toBe(true);
    // Three batches: two full ones and the rest.
    expect(asked).toHaveLength(3);
  });

  it("cuts batches along a time field too, and two passes at once delete each document once", async () => {
    const old = Array.from({ length: 1300 }, (_, i) => item(now - 40 * DAY + i * 10));
    await Promise.all(old.map((d) => items.insert(d)));
    await items.insert(item(now - DAY));
    const plan = { collection: items, field: "at", before: new Date(now - 30 * DAY).toISOString(), removable: { state: "done" as const } };
    const counts = await Promise.all([prune(plan, { pauseMs: 0 }), prune(plan, { pauseMs: 0 }), prune(plan, { pauseMs: 1 })]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(old.length);
    expect(await items.count(ALL_TENANTS, {})).toBe(1);
  });

  it("stops between batches when asked to", async () => {
    await Promise.all(Array.from({ length: 3 * PRUNE_BATCH_MAX }, (_, i) => items.insert(item(now - 40 * DAY + i))));
    const removed = await prune(
      { collection: items, field: "id", before: firstIdAt("evt", now - 30 * DAY), removable: {} },
      { pauseMs: 0, stopped: () => true },
    );
    expect(removed).toBe(PRUNE_BATCH_MAX);
  });
});
