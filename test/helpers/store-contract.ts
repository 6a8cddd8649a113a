import fc from "fast-check";
import { ALL_TENANTS, type Collection, type Doc, type Store } from "../../shared/storage/types";
import { anyJson } from "./odd-json";

/** The value as JSON: equal texts mean equal values, keys in the same order, `__proto__` included. */
const asJson = (value: unknown) => JSON.stringify(value);

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
  payload?: unknown;
}

export interface StoreUnderTest {
  store: Store;
  /** Closes the store and opens it again on the same data; given where persistence is promised. */
  reopen?: () => Promise<Store>;
  stop(): Promise<void>;
}

const A = { org_id: "org_a", environment: "live" } as const;
const A_TEST = { org_id: "org_a", environment: "test" } as const;
const B = { org_id: "org_b", environment: "live" } as const;

let counter = 0;
const next = () => (counter += 1);
const uid = (prefix = "it") => `${prefix}_${Date.now().toString(36)}${next().toString(36).padStart(6, "0")}`;

/**
 * The storage contract, written once and run against every adapter and transport. `make` opens a
 * fresh store; each test works in collections of its own.
 */
export function describeStoreContract(name: string, make: () => Promise<StoreUnderTest>, opts: { persistent?: boolean } = {}): void {
  describe(`storage contract: ${name}`, () => {
    let sut: StoreUnderTest;
    let items: Collection<Item>;
    const open = (collection: string) =>
      sut.store.collection<Item>(collection, [
        { fields: { slot: 1 }, unique: true, sparse: true },
        { fields: { org_id: 1, environment: 1, seq: 1 } },
      ]);

    beforeAll(async () => {
      sut = await make();
    });
    afterAll(async () => {
      await sut?.stop();
    });
    beforeEach(() => {
      items = open(`items_${next()}`);
    });

    const put = (over: Partial<Item> = {}) => items.insert({ id: uid(), ...A, name: "x", ...over });
    const seqs = (docs: (Item | null)[]) => docs.map((d) => d?.seq);

    it("inserts and gets a document back as it was, without internal keys", async () => {
      const doc = await put({ name: "first", nested: { a: 1 }, tags: ["a", "b"] });
      const got = await items.get(A, doc.id);
      expect(got).toEqual(doc);
      expect(got).not.toHaveProperty("_id");
      expect(await items.get(A, "it_missing")).toBeNull();
    });

    it("refuses a duplicate id and duplicates on unique indexes, compound and sparse, with a typed error", async () => {
      const doc = await put();
      await expect(items.insert({ ...doc, name: "again" })).rejects.toMatchObject({ type: "resource_exists", code: 409 });

      const people = sut.store.collection<Item>(`people_${next()}`, [{ fields: { org_id: 1, email: 1 }, unique: true }]);
      const person = (org_id: string, email: string) => people.insert({ id: uid(), org_id, environment: "live", name: "p", email });
      await person("org_a", "a@x.io");
      await expect(person("org_a", "a@x.io")).rejects.toMatchObject({
        type: "resource_exists",
        code: 409,
        data: { fields: expect.arrayContaining(["email"]) },
      });
      await expect(person("org_b", "a@x.io")).resolves.toBeTruthy();
      expect(await people.count(ALL_TENANTS, {})).toBe(2);

      // Sparse: any number of documents without the field, but one per value.
      await put();
      await put();
      await put({ slot: "s1" });
      await expect(put({ slot: "s1" })).rejects.toMatchObject({ type: "resource_exists", data: { fields: ["slot"] } });
      // An update into a taken unique value is refused as well.
      const other = await put({ slot: "s2" });
      await expect(items.update(A, { id: other.id }, { $set: { slot: "s1" } })).rejects.toMatchObject({ type: "resource_exists" });
    });

    it("keeps tenants apart: another organization or environment sees, updates and deletes nothing", async () => {
      const doc = await put({ name: "mine" });
      expect(await items.get(B, doc.id)).toBeNull();
      expect(await items.get(A_TEST, doc.id)).toBeNull();
      expect(await items.find(B, {})).toEqual([]);
      expect(await items.findOne(B, { id: doc.id })).toBeNull();
      expect(await items.count(A_TEST, {})).toBe(0);
      expect(await items.update(B, { id: doc.id }, { $set: { name: "stolen" } })).toBeNull();
      expect(await items.updateMany(A_TEST, {}, { $set: { name: "stolen" } })).toBe(0);
      expect(await items.delete(B, { id: doc.id })).toBeNull();
      expect(await items.deleteMany(B, {})).toBe(0);
      // A filter naming another tenant does not widen the scope.
      expect(await items.find(B, { org_id: "org_a" })).toEqual([]);
      expect((await items.get(A, doc.id))?.name).toBe("mine");

      // An organization-wide scope (no environment) sees both environments; ALL_TENANTS sees all.
      await put({ environment: "test" });
      await put({ org_id: "org_b" });
      expect(await items.count({ org_id: "org_a" }, {})).toBe(2);
      expect(await items.count(ALL_TENANTS, {})).toBe(3);
      expect(await items.get(ALL_TENANTS, doc.id)).toEqual(doc);
      expect(await items.update(ALL_TENANTS, { id: doc.id }, { $set: { name: "ops" } })).toMatchObject({ name: "ops" });
      expect(await items.delete(ALL_TENANTS, { id: doc.id })).toMatchObject({ id: doc.id });
    });

    it("filters with equality, dotted paths and the supported operators", async () => {
      for (let n = 1; n <= 5; n += 1) {
        await put({ n, status: n % 2 ? "odd" : "even", nested: { a: n }, ...(n === 5 ? {} : { tags: ["t"] }) });
      }
      const ns = async (filter: object) => (await items.find(A, filter as never, { sort: { n: 1 } })).map((d) => d.n);
      expect(await ns({ status: "odd" })).toEqual([1, 3, 5]);
      expect(await ns({ n: { $in: [2, 4, 9] } })).toEqual([2, 4]);
      expect(await ns({ n: { $nin: [1, 2] } })).toEqual([3, 4, 5]);
      expect(await ns({ status: { $ne: "odd" } })).toEqual([2, 4]);
      expect(await ns({ n: { $gt: 2, $lte: 4 } })).toEqual([3, 4]);
      expect(await ns({ n: { $gte: 4 } })).toEqual([4, 5]);
      expect(await ns({ n: { $lt: 2 } })).toEqual([1]);
      expect(await ns({ tags: { $exists: false } })).toEqual([5]);
      expect(await ns({ tags: { $exists: true }, status: "odd" })).toEqual([1, 3]);
      expect(await ns({ "nested.a": 3 })).toEqual([3]);
      expect(await ns({ "nested.a": { $gte: 4 } })).toEqual([4, 5]);
      expect(await ns({ id: { $in: [] } })).toEqual([]);
    });

    it("sorts, skips, limits and pages with the total", async () => {
      for (const seq of [4, 1, 7, 3, 6, 2, 5]) await put({ seq });
      const page = await items.page(A, {}, { sort: { seq: -1 }, skip: 2, limit: 3 });
      expect(page.total).toBe(7);
      expect(seqs(page.items)).toEqual([5, 4, 3]);
      expect(seqs((await items.page(A, { seq: { $gt: 5 } }, { sort: { seq: 1 }, limit: 10 })).items)).toEqual([6, 7]);
      expect(await items.page(A, {}, { skip: 10, limit: 5 })).toEqual({ items: [], total: 7 });
      expect(seqs(await items.find(A, {}, { sort: { seq: 1 }, limit: 2 }))).toEqual([1, 2]);
      expect((await items.findOne(A, {}, { sort: { seq: -1 } }))?.seq).toBe(7);
      expect(await items.findOne(A, { seq: 99 })).toBeNull();
    });

    it("plucks fields of the matches in order, without the rest of the documents", async () => {
      for (const seq of [3, 1, 2]) await put({ seq, name: `n${seq}`, status: seq === 2 ? undefined : "on" });
      await items.insert({ id: uid(), ...B, name: "other", seq: 0 });
      const picked = await items.pluck(A, { seq: { $gte: 1 } }, ["id", "seq", "status"], { sort: { seq: 1 }, limit: 2 });
      const docs = await items.find(A, {}, { sort: { seq: 1 }, limit: 2 });
      expect(picked).toEqual([
        { id: docs[0].id, seq: 1, status: "on" },
        // A field the document does not have is left out.
        { id: docs[1].id, seq: 2 },
      ]);
      expect(await items.pluck(ALL_TENANTS, {}, ["name"], { sort: { seq: -1 } })).toEqual([
        { name: "n3" },
        { name: "n2" },
        { name: "n1" },
        { name: "other" },
      ]);
    });

    it("counts at most `limit` matches when given one", async () => {
      for (const seq of [1, 2, 3, 4, 5, 6, 7]) await put({ seq, status: seq % 2 ? "odd" : "even" });
      expect(await items.count(A, {}, { limit: 3 })).toBe(3);
      expect(await items.count(A, {}, { limit: 100 })).toBe(7);
      expect(await items.count(A, { status: "even" }, { limit: 2 })).toBe(2);
      expect(await items.count(A, { status: "even" }, { limit: 10 })).toBe(3);
      expect(await items.count(B, {}, { limit: 3 })).toBe(0);
    });

    it("increments counters atomically, creating each once from its first increment", async () => {
      const counter = { id: `ctr_${next()}`, ...A, name: "per hour" } as Item;
      await Promise.all(Array.from({ length: 60 }, (_, i) => items.increment(counter, i % 3 === 0 ? { n: 1, seq: 2 } : { n: 1 })));
      expect(await items.get(A, counter.id)).toEqual({ ...counter, n: 60, seq: 40 });
      await items.increment(counter, { n: -10 });
      expect((await items.get(A, counter.id))?.n).toBe(50);
      // The same id in another tenant is refused, and the counter stays as it was.
      await expect(items.increment({ ...counter, org_id: "org_b" }, { n: 1 })).rejects.toMatchObject({ type: "resource_exists" });
      expect(await items.count(ALL_TENANTS, { id: counter.id })).toBe(1);
      expect((await items.get(A, counter.id))?.n).toBe(50);
    });

    it("updates with $set, $inc, $push and $unset and returns the updated document, or null", async () => {
      const doc = await put({ n: 1, tags: ["a"], status: "x" });
      const updated = await items.update(
        A,
        { id: doc.id },
        { $set: { name: "y", "nested.a": 9 }, $inc: { n: 2 }, $push: { tags: "b" }, $unset: { status: true } },
      );
      expect(updated).toEqual({ id: doc.id, ...A, name: "y", nested: { a: 9 }, n: 3, tags: ["a", "b"] });
      expect(await items.get(A, doc.id)).toEqual(updated);
      expect(await items.update(A, { id: doc.id, name: "not-y" }, { $set: { name: "z" } })).toBeNull();
      expect(await items.update(A, { id: "it_missing" }, { $set: { name: "z" } })).toBeNull();
      await expect(items.update(A, { id: doc.id }, { $set: { org_id: "org_b" } })).rejects.toBeTruthy();
      expect(await items.get(A, doc.id)).toEqual(updated);
    });

    it("finds every updated document through its indexes; a refused update leaves all of them as they were", async () => {
      const slot = `k${next()}`;
      const doc = await put({ slot, name: "a" });
      // The indexed value stays: the index must still lead to the document as updated.
      await items.update(A, { id: doc.id }, { $set: { name: "b" } });
      expect((await items.find(A, { slot })).map((d) => d.name)).toEqual(["b"]);
      expect((await items.get(A, doc.id))?.name).toBe("b");
      // A refused change (into a taken unique value, beside a change that alone would pass).
      const otherSlot = `k${next()}`;
      const other = await put({ slot: otherSlot, name: "o" });
      await expect(items.update(A, { id: other.id }, { $set: { slot, name: "zz" } })).rejects.toMatchObject({ type: "resource_exists" });
      expect((await items.find(A, { slot: otherSlot })).map((d) => [d.id, d.name])).toEqual([[other.id, "o"]]);
      expect((await items.find(A, { slot })).map((d) => [d.id, d.name])).toEqual([[doc.id, "b"]]);
      // Moved to a free value: found there, and no longer at the old one.
      const moved = `k${next()}x`;
      await items.update(A, { id: other.id }, { $set: { slot: moved } });
      expect(await items.find(A, { slot: otherSlot })).toEqual([]);
      expect((await items.find(A, { slot: moved })).map((d) => d.id)).toEqual([other.id]);
    });

    it("stores any JSON value and reads it back exactly, inserted or set by an update, in any field", async () => {
      // `seq` is an indexed field (an engine may keep it apart from the rest), `payload` is not.
      const same = (got: Item | null, want: Record<string, unknown>) => {
        expect(got).toEqual(want);
        for (const field of ["payload", "seq", "tags"])
          expect(asJson((got as Record<string, unknown> | null)?.[field])).toBe(asJson(want[field]));
      };
      await fc.assert(
        fc.asyncProperty(anyJson, anyJson, async (value, later) => {
          const doc = await put({ payload: value, seq: value } as Partial<Item>);
          same(await items.get(A, doc.id), doc as unknown as Record<string, unknown>);
          const updated = await items.update(A, { id: doc.id }, { $set: { payload: later, seq: later }, $push: { tags: later as string } });
          const want = { ...doc, payload: later, seq: later, tags: [later] };
          same(updated, want);
          same(await items.get(A, doc.id), want);
        }),
        { numRuns: 150 },
      );
    });

    it("filters an indexed field holding values of every JSON type by type, as MongoDB does", async () => {
      const values: unknown[] = ["7", 7, 7.5, true, false, null, { a: 1 }, [1], "", 0];
      for (const [i, seq] of values.entries()) await put({ name: `v${i}`, seq } as Partial<Item>);
      await put({ name: "absent" });
      const names = async (filter: object) => (await items.find(A, filter as never, { sort: { name: 1 } })).map((d) => d.name);
      expect(await names({ seq: "7" })).toEqual(["v0"]);
      expect(await names({ seq: 7 })).toEqual(["v1"]);
      expect(await names({ seq: true })).toEqual(["v3"]);
      expect(await names({ seq: false })).toEqual(["v4"]);
      expect(await names({ seq: null })).toEqual(["absent", "v5"]);
      expect(await names({ seq: { $gte: 7 } })).toEqual(["v1", "v2"]);
      expect(await names({ seq: { $lt: "7" } })).toEqual(["v8"]);
      expect(await names({ seq: { $in: [0, "", false] } })).toEqual(["v4", "v8", "v9"]);
      expect(await names({ seq: { $exists: false } })).toEqual(["absent"]);
      expect((await names({ seq: { $ne: null } })).length).toBe(values.length - 1);
      expect(await items.updateMany(A, { seq: true }, { $set: { seq: 8 } })).toBe(1);
      expect(await names({ seq: 8 })).toEqual(["v3"]);
      expect(await items.updateMany(A, { seq: 8 }, { $unset: { seq: true } })).toBe(1);
      expect(await names({ seq: { $exists: false } })).toEqual(["absent", "v3"]);
    });

    it("writes atomically across collections: all of the writes or none", async () => {
      const log = sut.store.collection<Item>(`log_${next()}`, [{ fields: { slot: 1 }, unique: true, sparse: true }]);
      const doc = await put({ status: "active" });
      // A state change and the event that records it, together.
      const event = { id: uid("ev"), ...A, name: "revoked", slot: `s${next()}` };
      const written = await sut.store.atomically([
        { op: "update", collection: items, scope: A, filter: { id: doc.id, status: "active" }, update: { $set: { status: "revoked" } } },
        { op: "insert", collection: log, doc: event },
      ]);
      expect(written).toEqual([{ ...doc, status: "revoked" }, event]);
      expect(await log.get(A, event.id)).toEqual(event);
      // The compare-and-set loses the second time: nothing of the batch is stored.
      const again = { id: uid("ev"), ...A, name: "revoked twice" };
      expect(
        await sut.store.atomically([
          { op: "insert", collection: log, doc: again },
          { op: "update", collection: items, scope: A, filter: { id: doc.id, status: "active" }, update: { $set: { status: "revoked" } } },
        ]),
      ).toBeNull();
      expect(await log.get(A, again.id)).toBeNull();
      // A refused write undoes the ones before it, and says why.
      const first = { id: uid("ev"), ...A, name: "first" };
      await expect(
        sut.store.atomically([
          { op: "insert", collection: log, doc: first },
          { op: "update", collection: items, scope: A, filter: { id: doc.id }, update: { $set: { name: "changed" } } },
          { op: "insert", collection: log, doc: { id: uid("ev"), ...A, name: "dup", slot: event.slot } as Item },
        ]),
      ).rejects.toMatchObject({ type: "resource_exists" });
      expect(await log.get(A, first.id)).toBeNull();
      expect((await items.get(A, doc.id))?.name).toBe(doc.name);
    });

    it("lets exactly one of 50 concurrent compare-and-sets win", async () => {
      const doc = await put({ status: "queued" });
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          items.update(A, { id: doc.id, status: "queued" }, { $set: { status: "running", name: `w${i}` } }),
        ),
      );
      const winners = results.filter((r) => r !== null);
      expect(winners).toHaveLength(1);
      expect(await items.get(A, doc.id)).toEqual(winners[0]);
    });

    it("hands 20 jobs to 40 concurrent claimers once each, taking them in sort order", async () => {
      const jobs = Array.from({ length: 20 }, (_, i) => i + 1);
      const claim = (i: number) =>
        items.update(ALL_TENANTS, { status: "due" }, { $set: { status: "claimed", name: `c${i}` } }, { sort: { seq: 1 } });
      // Inserted out of order, so insertion order cannot pass for sort order.
      for (const seq of [...jobs].reverse()) await put({ seq, status: "due" });
      const claims = await Promise.all(Array.from({ length: 40 }, (_, i) => claim(i)));
      const won = claims.filter((c): c is Item => c !== null);
      expect(won.map((c) => c.seq).sort((a, b) => a! - b!)).toEqual(jobs);
      expect(await items.count(A, { status: "due" })).toBe(0);

      // Fewer claimers than jobs: together they take exactly the first ones in sort order.
      const second = open(`items_${next()}`);
      for (const seq of [...jobs].reverse()) await second.insert({ id: uid(), ...A, name: "x", seq, status: "due" });
      const first10 = await Promise.all(
        Array.from({ length: 10 }, () => second.update(A, { status: "due" }, { $set: { status: "claimed" } }, { sort: { seq: 1 } })),
      );
      expect(seqs(first10).sort((a, b) => a! - b!)).toEqual(jobs.slice(0, 10));
      expect((await second.update(A, { status: "due" }, { $set: { status: "claimed" } }, { sort: { seq: -1 } }))?.seq).toBe(20);
    });

    it("sets and unsets indexed fields with updateMany over rows holding them as any JSON type, in scope, all or nothing", async () => {
      const names = async (filter: object) => (await items.find(A, filter as never, { sort: { name: 1 } })).map((d) => d.name);
      const odd: unknown[] = [true, { a: 1 }, [2], null];
      for (let i = 0; i < 6; i += 1) await put({ name: `n${i}`, seq: i });
      for (const [i, seq] of odd.entries()) await put({ name: `o${i}`, seq } as Partial<Item>);
      await items.insert({ id: uid(), ...B, name: "other", seq: 1 });
      const ids = (await items.find(A, {})).map((d) => d.id);
      expect(await items.updateMany(A, { id: { $in: ids } }, { $unset: { seq: true } })).toBe(ids.length);
      expect(await names({ seq: { $exists: true } })).toEqual([]);
      expect((await items.find(B, {}))[0].seq).toBe(1);
      expect(await items.updateMany(A, { name: { $in: ["n1", "o0", "o1"] } }, { $set: { seq: 9, status: "s" } })).toBe(3);
      expect(await names({ seq: 9, status: "s" })).toEqual(["n1", "o0", "o1"]);
      // A unique index refusing the second row undoes the first.
      await expect(items.updateMany(A, { seq: 9 }, { $set: { slot: "same" } })).rejects.toMatchObject({
        type: "resource_exists",
        data: { fields: ["slot"] },
      });
      expect(await names({ slot: { $exists: true } })).toEqual([]);
    });

    it("leaves a field set to undefined out of the document, as JSON does: absent to filters, indexes and $inc", async () => {
      const doc = await put({ status: undefined, n: undefined, slot: undefined, nested: { a: undefined } as never });
      const got = await items.get(A, doc.id);
      expect(got).toEqual({ id: doc.id, ...A, name: "x", nested: {} });
      expect(Object.keys(got!)).not.toContain("status");
      expect((await items.find(A, { status: { $exists: false } })).map((d) => d.id)).toEqual([doc.id]);
      expect(await items.count(A, { status: null })).toBe(1);
      // A sparse unique index counts none of them.
      await expect(put({ slot: undefined })).resolves.toBeTruthy();
      expect(await items.update(A, { id: doc.id }, { $inc: { n: 2 } })).toMatchObject({ n: 2 });
      // A $set to undefined removes the field, as JSON would.
      expect(await items.update(A, { id: doc.id }, { $set: { n: undefined, name: "y" } })).toEqual({
        id: doc.id,
        ...A,
        name: "y",
        nested: {},
      });
    });

    it("stores a number JSON cannot write (1e400 parses as Infinity) as null, in any field", async () => {
      const doc = await put({ seq: Number.POSITIVE_INFINITY, payload: [Number.NEGATIVE_INFINITY, 1] } as Partial<Item>);
      expect(await items.get(A, doc.id)).toEqual({ ...doc, seq: null, payload: [null, 1] });
      expect(await items.count(A, { seq: null })).toBe(1);
    });

    it("reads nothing with a limit of 0, and counts nothing", async () => {
      for (const seq of [1, 2, 3]) await put({ seq });
      expect(await items.find(A, {}, { limit: 0 })).toEqual([]);
      expect(await items.pluck(A, {}, ["id"], { limit: 0 })).toEqual([]);
      expect(await items.count(A, {}, { limit: 0 })).toBe(0);
      expect(await items.page(A, {}, { limit: 0 })).toEqual({ items: [], total: 3 });
    });

    it("refuses a filter with an undefined value, which would match more than asked", async () => {
      const doc = await put({ status: "kept" });
      const refused = { type: "internal_error" };
      const filter = { id: doc.id, status: undefined } as never;
      await expect(items.find(A, filter)).rejects.toMatchObject(refused);
      await expect(items.count(A, { status: { $ne: undefined } } as never)).rejects.toMatchObject(refused);
      await expect(items.update(A, filter, { $set: { status: "changed" } })).rejects.toMatchObject(refused);
      await expect(items.updateMany(A, filter, { $set: { status: "changed" } })).rejects.toMatchObject(refused);
      await expect(items.deleteMany(A, filter)).rejects.toMatchObject(refused);
      expect(await items.get(A, doc.id)).toEqual(doc);
    });

    it("refuses update paths that overlap or lead through a value that cannot hold them, changing nothing", async () => {
      const doc = await put({ n: 5, nested: { a: 1 } });
      const refused = { type: "internal_error" };
      await expect(items.update(A, { id: doc.id }, { $set: { nested: { a: 2 }, "nested.a": 3 } })).rejects.toMatchObject(refused);
      await expect(items.update(A, { id: doc.id }, { $set: { name: "z" }, $unset: { name: true } })).rejects.toMatchObject(refused);
      await expect(items.update(A, { id: doc.id }, { $set: { "n.deeper": 1, name: "z" } })).rejects.toMatchObject(refused);
      await expect(items.updateMany(A, {}, { $inc: { "name.count": 1 } })).rejects.toMatchObject(refused);
      expect(await items.get(A, doc.id)).toEqual(doc);
    });

    it("plucks a dotted field under its dotted name", async () => {
      const doc = await put({ seq: 1, nested: { a: 7 } });
      await put({ seq: 2 });
      expect(await items.pluck(A, {}, ["id", "nested.a"] as (keyof Item)[], { sort: { seq: 1 } })).toEqual([
        { id: doc.id, "nested.a": 7 },
        { id: expect.any(String) },
      ]);
    });

    it("keeps a counter without an environment apart from one with it", async () => {
      const orgWide = { id: `ctr_${next()}`, org_id: "org_a", name: "per org" } as unknown as Item;
      await items.increment(orgWide, { n: 1 });
      await items.increment(orgWide, { n: 1 });
      await expect(items.increment({ ...orgWide, environment: "live" }, { n: 1 })).rejects.toMatchObject({ type: "resource_exists" });
      expect(await items.get({ org_id: "org_a" }, orgWide.id)).toEqual({ ...orgWide, n: 2 });
    });

    it("names the collection of the write a unique index refused inside atomically", async () => {
      const log = sut.store.collection<Item>(`log_${next()}`, [{ fields: { slot: 1 }, unique: true, sparse: true }]);
      const taken = await log.insert({ id: uid("ev"), ...A, name: "taken", slot: `s${next()}` });
      const doc = await put();
      await expect(
        sut.store.atomically([
          { op: "update", collection: items, scope: A, filter: { id: doc.id }, update: { $set: { name: "changed" } } },
          { op: "insert", collection: log, doc: { id: uid("ev"), ...A, name: "dup", slot: taken.slot } as Item },
        ]),
      ).rejects.toMatchObject({ type: "resource_exists", data: { collection: log.name, fields: ["slot"] } });
      expect(await items.get(A, doc.id)).toEqual(doc);
    });

    it("counts what updateMany, delete and deleteMany touched", async () => {
      for (let n = 1; n <= 4; n += 1) await put({ n });
      expect(await items.updateMany(A, { n: { $gte: 3 } }, { $set: { status: "big" } })).toBe(2);
      expect(await items.updateMany(A, { n: 99 }, { $set: { status: "big" } })).toBe(0);
      const gone = await items.delete(A, { n: 1 });
      expect(gone).toMatchObject({ n: 1 });
      expect(gone).not.toHaveProperty("_id");
      expect(await items.delete(A, { n: 1 })).toBeNull();
      expect(await items.deleteMany(A, { status: "big" })).toBe(2);
      expect(await items.count(A, {})).toBe(1);
    });

    if (opts.persistent) {
      it("keeps documents and unique indexes across a close and reopen", async () => {
        const name = `persist_${next()}`;
        const col = open(name);
        const doc = await col.insert({ id: uid(), ...A, name: "kept", slot: "s1" });
        await col.update(A, { id: doc.id }, { $set: { status: "changed" } });
        await col.delete(A, { id: (await col.insert({ id: uid(), ...A, name: "gone" })).id });
        sut.store = await sut.reopen!();
        const again = sut.store.collection<Item>(name);
        expect(await again.find(A, {})).toEqual([{ ...doc, status: "changed" }]);
        await expect(again.insert({ id: uid(), ...A, name: "dup", slot: "s1" })).rejects.toMatchObject({ type: "resource_exists" });
      });

      it("reads every generated JSON value back exactly after a close and reopen", async () => {
        const name = `values_${next()}`;
        const values = fc.sample(anyJson, { numRuns: 300, seed: 15 });
        const col = open(name);
        const docs = await Promise.all(
          values.map((payload, i) => col.insert({ id: `v_${String(i).padStart(4, "0")}`, ...A, name: "v", payload } as Item)),
        );
        sut.store = await sut.reopen!();
        const again = sut.store.collection<Item>(name);
        const read = await again.find(A, {}, { sort: { id: 1 } });
        expect(read.map(asJson)).toEqual(docs.map(asJson));
      });

      it("finds documents stored before an index on their field was declared", async () => {
        const name = `later_${next()}`;
        const plain = sut.store.collection<Item>(name);
        for (const seq of [3, 1, 2]) await plain.insert({ id: uid(), ...A, name: `s${seq}`, seq, status: seq === 2 ? "x" : "y" });
        sut.store = await sut.reopen!();
        const indexed = sut.store.collection<Item>(name, [{ fields: { seq: 1 } }, { fields: { status: 1, seq: 1 } }]);
        expect((await indexed.find(A, { seq: { $gte: 2 } }, { sort: { seq: 1 } })).map((d) => d.name)).toEqual(["s2", "s3"]);
        expect((await indexed.find(A, { status: "y" }, { sort: { seq: -1 } })).map((d) => d.name)).toEqual(["s3", "s1"]);
        expect(await indexed.update(A, { seq: 1 }, { $unset: { seq: true } })).toMatchObject({ name: "s1" });
        expect(await indexed.count(A, { seq: { $exists: true } })).toBe(2);
      });
    }
  });
}
