import { ALL_TENANTS, type Collection, type Doc, type Store } from "../../shared/storage/types";

interface Item extends Doc {
  environment: "live" | "test";
  name: string;
  status?: string;
  n?: number;
  tags?: string[];
  nested?: { a: number };
  email?: string;
  slot?: string;
  seq?: number;
}

export interface StoreUnderTest {
  store: Store;
  /** Closes and opens the same store again (persistence); absent where it means nothing. */
  reopen?: () => Promise<Store>;
  stop(): Promise<void>;
}

const A = { org_id: "org_a", environment: "live" } as const;
const A_TEST = { org_id: "org_a", environment: "test" } as const;
const B = { org_id: "org_b", environment: "live" } as const;

let counter = 0;
const uid = (p = "it") => `${p}_${Date.now().toString(36)}${(counter += 1).toString(36).padStart(6, "0")}`;

/**
 * The storage contract: every adapter passes the same suite. `make` opens a fresh, empty store.
 */
export function describeStoreContract(name: string, make: () => Promise<StoreUnderTest>, opts: { persistent?: boolean } = {}): void {
  describe(`storage contract: ${name}`, () => {
    let sut: StoreUnderTest;
    let items: Collection<Item>;
    const fresh = (c: string) =>
      sut.store.collection<Item>(c, [
        { fields: { slot: 1 }, unique: true, sparse: true },
        { fields: { org_id: 1, environment: 1, seq: 1 } },
      ]);

    beforeAll(async () => {
      sut = await make();
    });
    afterAll(async () => {
      await sut.stop();
    });
    beforeEach(() => {
      items = fresh(`items_${(counter += 1)}`);
    });

    const put = (over: Partial<Item> & { org_id?: string } = {}) =>
      items.insert({ id: uid(), org_id: A.org_id, environment: A.environment, name: "x", ...over } as Item);

    it("inserts and gets a document back as it was, without internal keys", async () => {
      const doc = await put({ name: "first", nested: { a: 1 }, tags: ["a", "b"] });
      const got = await items.get(A, doc.id);
      expect(got).toEqual(doc);
      expect(got).not.toHaveProperty("_id");
    });

    it("refuses a duplicate id and duplicates on unique indexes, compound and sparse", async () => {
      const doc = await put();
      await expect(items.insert({ ...doc })).rejects.toMatchObject({ type: "resource_exists" });
      const people = sut.store.collection<Item>(`people_${(counter += 1)}`, [{ fields: { org_id: 1, email: 1 }, unique: true }]);
      const person = (org_id: string, email: string) => people.insert({ id: uid(), org_id, environment: "live", name: "p", email });
      await person("org_a", "a@x.io");
      await expect(person("org_a", "a@x.io")).rejects.toMatchObject({ type: "resource_exists", code: 409 });
      await expect(person("org_b", "a@x.io")).resolves.toBeTruthy();
      expect(await people.count(ALL_TENANTS, {})).toBe(2);
      // sparse: many documents without the field
      await put();
      await put();
      await put({ slot: "s1" });
      await expect(put({ slot: "s1" })).rejects.toMatchObject({ type: "resource_exists" });
    });

    it("keeps tenants apart: another organization or environment sees, updates and deletes nothing", async () => {
      const doc = await put({ name: "mine" });
      expect(await items.get(B, doc.id)).toBeNull();
      expect(await items.get(A_TEST, doc.id)).toBeNull();
      expect(await items.find(B, {})).toEqual([]);
      expect(await items.count(A_TEST, {})).toBe(0);
      expect(await items.update(B, { id: doc.id }, { $set: { name: "stolen" } })).toBeNull();
      expect(await items.updateMany(A_TEST, {}, { $set: { name: "stolen" } })).toBe(0);
      expect(await items.delete(B, { id: doc.id })).toBeNull();
      expect(await items.deleteMany(B, {})).toBe(0);
      expect((await items.get(A, doc.id))?.name).toBe("mine");
      // An org-wide scope (no environment) sees both environments.
      await put({ environment: "test" });
      expect(await items.count({ org_id: "org_a" }, {})).toBe(2);
      expect(await items.get(ALL_TENANTS, doc.id)).toEqual(doc);
    });

    it("filters with equality, dotted paths and the supported operators", async () => {
      for (let n = 1; n <= 5; n += 1) await put({ n, status: n % 2 ? "odd" : "even", nested: { a: n }, ...(n === 5 ? {} : { tags: ["t"] }) });
      const ns = async (f: object) => (await items.find(A, f as never, { sort: { n: 1 } })).map((d) => d.n);
      expect(await ns({ status: "odd" })).toEqual([1, 3, 5]);
      expect(await ns({ n: { $in: [2, 4, 9] } })).toEqual([2, 4]);
      expect(await ns({ n: { $nin: [1, 2] } })).toEqual([3, 4, 5]);
      expect(await ns({ status: { $ne: "odd" } })).toEqual([2, 4]);
      expect(await ns({ n: { $gt: 2, $lte: 4 } })).toEqual([3, 4]);
      expect(await ns({ n: { $gte: 4 } })).toEqual([4, 5]);
      expect(await ns({ n: { $lt: 2 } })).toEqual([1]);
      expect(await ns({ tags: { $exists: false } })).toEqual([5]);
      expect(await ns({ "nested.a": 3 })).toEqual([3]);
    });

    it("sorts, skips, limits and pages with the total", async () => {
      for (let seq = 1; seq <= 7; seq += 1) await put({ seq });
      const page = await items.page(A, {}, { sort: { seq: -1 }, skip: 2, limit: 3 });
      expect(page.total).toBe(7);
      expect(page.items.map((d) => d.seq)).toEqual([5, 4, 3]);
      expect((await items.findOne(A, {}, { sort: { seq: 1 } }))?.seq).toBe(1);
      expect(await items.findOne(A, { seq: 99 })).toBeNull();
    });

    it("updates with $set, $inc, $push and $unset and returns the updated document or null", async () => {
      const doc = await put({ n: 1, tags: ["a"], status: "x" });
      const updated = await items.update(A, { id: doc.id }, { $set: { name: "y" }, $inc: { n: 2 }, $push: { tags: "b" }, $unset: { status: true } });
      expect(updated).toMatchObject({ id: doc.id, name: "y", n: 3, tags: ["a", "b"] });
      expect(updated).not.toHaveProperty("status");
      expect(updated).not.toHaveProperty("_id");
      expect(await items.get(A, doc.id)).toEqual(updated);
      expect(await items.update(A, { id: doc.id, name: "not-y" }, { $set: { name: "z" } })).toBeNull();
      await expect(items.update(A, { id: doc.id }, { $set: { org_id: "org_b" } })).rejects.toBeTruthy();
    });

    it("lets exactly one of 50 concurrent compare-and-sets win", async () => {
      const doc = await put({ status: "queued" });
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => items.update(A, { id: doc.id, status: "queued" }, { $set: { status: "running", name: `w${i}` } })),
      );
      const winners = results.filter(Boolean);
      expect(winners).toHaveLength(1);
      expect((await items.get(A, doc.id))?.name).toBe(winners[0]?.name);
    });

    it("hands 20 jobs to 40 concurrent claimers once each, in sort order", async () => {
      for (let seq = 1; seq <= 20; seq += 1) await put({ seq, status: "due" });
      const claims = await Promise.all(
        Array.from({ length: 40 }, (_, i) => items.update(ALL_TENANTS, { status: "due" }, { $set: { status: "claimed", name: `c${i}` } }, { sort: { seq: 1 } })),
      );
      const won = claims.filter((c): c is Item => c !== null);
      expect(won).toHaveLength(20);
      expect(new Set(won.map((c) => c.id)).size).toBe(20);
      expect(won.map((c) => c.seq).sort((a, b) => a! - b!)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(await items.count(A, { status: "due" })).toBe(0);
      // Sequential claims come in sort order.
      for (let seq = 1; seq <= 3; seq += 1) await put({ seq: 100 + seq, status: "next" });
      const first = await items.update(A, { status: "next" }, { $set: { status: "taken" } }, { sort: { seq: 1 } });
      expect(first?.seq).toBe(101);
    });

    it("counts what updateMany, delete and deleteMany touched", async () => {
      for (let n = 1; n <= 4; n += 1) await put({ n });
      expect(await items.updateMany(A, { n: { $gte: 3 } }, { $set: { status: "big" } })).toBe(2);
      const gone = await items.delete(A, { n: 1 });
      expect(gone?.n).toBe(1);
      expect(await items.delete(A, { n: 1 })).toBeNull();
      expect(await items.deleteMany(A, { status: "big" })).toBe(2);
      expect(await items.count(A, {})).toBe(1);
    });

    if (opts.persistent) {
      it("keeps documents across a close and reopen", async () => {
        const name = `persist_${(counter += 1)}`;
        const col = fresh(name);
        const doc = await col.insert({ id: uid(), ...A, name: "kept" });
        await col.update(A, { id: doc.id }, { $set: { status: "changed" } });
        sut.store = await sut.reopen!();
        const again = sut.store.collection<Item>(name);
        expect(await again.get(A, doc.id)).toMatchObject({ name: "kept", status: "changed" });
      });
    }
  });
}
