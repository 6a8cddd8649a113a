import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mongoose from "mongoose";
import {
  STORAGE_POLICIES,
  storageUsageSpec,
  storedSize,
  tenantOf,
  usageId,
  type StorageUsageDoc,
} from "../../shared/records/storage-quota";
import { applyFixes, recountService, RecountConflict, uncountedCollections } from "../../shared/runtime/storage-recount";
import { MongooseStore } from "../../shared/storage/mongoose";
import { SqliteStore } from "../../shared/storage/sqlite";
import { ALL_TENANTS, openCollection, type Doc, type Store } from "../../shared/storage/types";
import { withDatabase } from "../helpers/platform";

/**
 * Recounting one service's storage counters on each adapter: every document is read whatever the
 * batch size, rows are set, created and removed to exactly the documents' sums, and a row changed
 * by someone else after it was read stops the write. MongoDB where MONGO_URL is set (npm run test:mongo).
 */
const ADAPTERS: [string, () => Promise<{ store: Store; stop(): Promise<void> }>][] = [
  [
    "embedded (SQLite)",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "wfp-r-"));
      const store = new SqliteStore(dir);
      return {
        store,
        async stop() {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ],
];
const mongoUrl = process.env.MONGO_URL;
if (mongoUrl) {
  ADAPTERS.push([
    "MongoDB (mongoose)",
    async () => {
      const url = withDatabase(mongoUrl, `wfp_contract_recount_${process.pid}_${Date.now()}`);
      const store = new MongooseStore(url);
      await store.opened();
      return {
        store,
        async stop() {
          await store.close();
          const conn = await mongoose.createConnection(url).asPromise();
          await conn.dropDatabase();
          await conn.close();
        },
      };
    },
  ]);
}

const COLLECTIONS = ["events", "event_types"];

for (const [name, make] of ADAPTERS) {
  describe(`storage recount on the ${name} store`, () => {
    let store: Store;
    let stop: () => Promise<void>;
    const usage = () => openCollection(store, storageUsageSpec("events"));
    const rows = async () => Object.fromEntries((await usage().find(ALL_TENANTS, {})).map((r) => [r.id, r.bytes]));

    /** The sums, from every document read at once. */
    async function sums(): Promise<Record<string, number>> {
      const out: Record<string, number> = {};
      for (const c of COLLECTIONS)
        for (const doc of (await store.collection<Doc>(c).find(ALL_TENANTS, {})) as unknown as Record<string, unknown>[]) {
          const t = tenantOf(doc);
          if (t) out[usageId(t)] = (out[usageId(t)] ?? 0) + storedSize(doc, STORAGE_POLICIES[c].volatile);
        }
      return out;
    }

    beforeAll(async () => {
      ({ store, stop } = await make());
      const events = store.collection<Doc>("events");
      for (let i = 0; i < 9; i += 1)
        await events.insert({
          id: `evt_${i}`,
          org_id: `org_${i % 3}`,
          environment: i % 2 ? "live" : "test",
          type: "a.b",
          data: { n: "x".repeat(i * 10) },
          undelivered: true,
        } as Doc);
      await store.collection<Doc>("event_types").insert({ id: "et_1", org_id: "org_0", type: "a.b" } as Doc);
      // A document of no organization counts for no one.
      await store.collection<Doc>("event_types").insert({ id: "et_sys", type: "system" } as unknown as Doc);
    });
    afterAll(() => stop());

    it("finds the documents its counters do not know", async () => {
      const counted = COLLECTIONS.map((c) => store.collection<Doc>(c));
      expect(await uncountedCollections(usage(), counted)).toEqual(COLLECTIONS);
      expect(await uncountedCollections(usage(), [store.collection<Doc>("webhooks")])).toEqual([]);
    });

    it("reads every document whatever the batch size", async () => {
      const want = await sums();
      expect(Object.keys(want)).toHaveLength(6);
      for (const batch of [1, 2, 3, 9, 10, 100]) {
        const r = await recountService(store, "events", COLLECTIONS, { dryRun: true, batch });
        expect({ batch, documents: r.documents }).toEqual({ batch, documents: 11 });
        expect(Object.fromEntries(r.fixes.map((f) => [f.id, f.after]))).toEqual(want);
      }
      expect(await rows()).toEqual({});
    });

    it("sets rows low, high or stale to the documents' sums, and then finds nothing to change", async () => {
      const want = await sums();
      await recountService(store, "events", COLLECTIONS, { batch: 4 });
      expect(await rows()).toEqual(want);
      await usage().increment({ id: "org_1:live", org_id: "org_1", environment: "live", bytes: 0 }, { bytes: -40 });
      await usage().increment({ id: "org_2:test", org_id: "org_2", environment: "test", bytes: 0 }, { bytes: 1000 });
      await usage().delete({ org_id: "org_0", environment: "test" }, { id: "org_0:test" });
      await usage().insert({ id: "org_gone:live", org_id: "org_gone", environment: "live", bytes: 5 });
      const r = await recountService(store, "events", COLLECTIONS, { batch: 4 });
      expect(r.fixes.map((f) => [f.id, f.before, f.after])).toEqual([
        ["org_0:test", null, want["org_0:test"]],
        ["org_1:live", want["org_1:live"] - 40, want["org_1:live"]],
        ["org_2:test", want["org_2:test"] + 1000, want["org_2:test"]],
        ["org_gone:live", 5, null],
      ]);
      expect(await rows()).toEqual(want);
      expect(await uncountedCollections(usage(), [store.collection<Doc>("events")])).toEqual([]);
      expect((await recountService(store, "events", COLLECTIONS)).fixes).toEqual([]);
    });

    it("stops at a row changed or created after it was read, and leaves it as the other writer left it", async () => {
      await usage().increment({ id: "org_1:live", org_id: "org_1", environment: "live", bytes: 0 }, { bytes: 7 });
      const changed = (await recountService(store, "events", COLLECTIONS, { dryRun: true })).fixes;
      expect(changed).toHaveLength(1);
      await usage().increment({ id: "org_1:live", org_id: "org_1", environment: "live", bytes: 0 }, { bytes: 3 });
      const row = await rows();
      await expect(applyFixes(store, "events", changed)).rejects.toThrow(RecountConflict);
      expect(await rows()).toEqual(row);

      await usage().delete({ org_id: "org_1", environment: "live" }, { id: "org_1:live" });
      const missing = (await recountService(store, "events", COLLECTIONS, { dryRun: true })).fixes;
      expect(missing.map((f) => f.before)).toEqual([null]);
      await usage().insert({ id: "org_1:live", org_id: "org_1", environment: "live", bytes: 1 } as StorageUsageDoc);
      await expect(applyFixes(store, "events", missing)).rejects.toThrow(/changed while it was recounted/);
    });
  });
}
