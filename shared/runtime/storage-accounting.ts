import {
  STORAGE_COUNTING_SERVICES,
  STORAGE_POLICIES,
  storageUsageSpec,
  storageQuotaExceeded,
  storedSize,
  tenantOf,
  usageDoc,
  usageId,
  volatileOnly,
  type StoragePolicy,
  type StorageUsageDoc,
} from "../records/storage-quota";
import { ApiError } from "../errors";
import { applyUpdate } from "../storage/update";
import type { AtomicWrite, Collection, Doc, Filter, FindOptions, Scope, Store, Tenant, Update } from "../storage/types";

/** Documents a `deleteMany` or `updateMany` of a counted collection handles per read. */
const BATCH = 256;
/** Tries of a write whose compare-and-set lost to a concurrent write, before answering it lost. */
const TRIES = 5;

type Obj = Record<string, unknown>;
type Change = { tenant: Required<Tenant>; delta: number; checked: boolean };

/**
 * Keeps each tenant's storage counters (shared/records/storage-quota.ts) in step with its documents:
 * an insert or update of a counted collection and the change of its tenant's counter row (this
 * service's) are one `atomically`. An insert into a `checked` collection carries the condition that
 * this row plus the tenant's rows of the other services, read just before, stay within the quota:
 * exact among this service's writers, and across services over by at most what the others store
 * in that instant (one write each).
 */
export class StorageAccounting {
  /** This service's counters. */
  readonly usage: Collection<StorageUsageDoc>;
  /** The other services' counters (read only). */
  readonly others: Collection<StorageUsageDoc>[];

  constructor(
    private readonly store: Store,
    readonly limit: number,
    service: string,
  ) {
    const open = (name: string) => {
      const spec = storageUsageSpec(name);
      return store.collection<StorageUsageDoc>(spec.name, spec.indexes);
    };
    this.usage = open(service);
    this.others = STORAGE_COUNTING_SERVICES.filter((s) => s !== service).map(open);
  }

  /** The bytes the other services count for `tenant`. */
  private async elsewhere(tenant: Required<Tenant>): Promise<number> {
    const rows = await Promise.all(this.others.map((c) => c.get(tenant, usageId(tenant))));
    return rows.reduce((sum, row) => sum + (row?.bytes ?? 0), 0);
  }

  /** `collection` with its writes counted, when its collection is counted; else itself. */
  wrap<T extends Doc>(collection: Collection<T>): Collection<T> {
    const policy = STORAGE_POLICIES[collection.name];
    return policy ? new CountedCollection(collection, policy, this) : collection;
  }

  /**
   * What `writes` change of whose counter: each insert by its size, each update by the difference
   * it makes to its document (read first; the update is then narrowed to that document by id).
   * Null when an update matches no document (the writes would answer null).
   */
  async measure(writes: AtomicWrite[]): Promise<{ writes: AtomicWrite[]; changes: Change[] } | null> {
    const changes: Change[] = [];
    const out: AtomicWrite[] = [];
    for (const write of writes) {
      const policy = STORAGE_POLICIES[write.collection.name];
      if (!policy) {
        out.push(write);
        continue;
      }
      if (write.op === "insert") {
        const tenant = tenantOf(write.doc as unknown as Obj);
        if (tenant) changes.push({ tenant, delta: storedSize(write.doc as unknown as Obj, policy.volatile), checked: policy.checked });
        out.push(write);
        continue;
      }
      if (volatileOnly(write.update, policy.volatile)) {
        out.push(write);
        continue;
      }
      const before = (await write.collection.findOne(write.scope, write.filter)) as Obj | null;
      if (!before) return null;
      const after = applyUpdate(structuredClone(before), write.update);
      const tenant = tenantOf(before);
      if (tenant) changes.push({ tenant, delta: storedSize(after, policy.volatile) - storedSize(before, policy.volatile), checked: false });
      out.push({ ...write, filter: { ...write.filter, id: before.id as string } });
    }
    return { writes: out, changes };
  }

  /**
   * Stores `writes` and their counters' changes together. A tenant's checked growth is refused
   * with `quota_exceeded` when it would take the counter past the limit; a counter not yet there
   * is created first. Answers as `Store.atomically` does (null: a compare-and-set lost).
   */
  async apply(writes: AtomicWrite[], changes: Change[]): Promise<Doc[] | null> {
    const byTenant = new Map<string, { tenant: Required<Tenant>; delta: number; grows: number }>();
    for (const c of changes) {
      const key = usageId(c.tenant);
      const entry = byTenant.get(key) ?? { tenant: c.tenant, delta: 0, grows: 0 };
      entry.delta += c.delta;
      if (c.checked) entry.grows += c.delta;
      byTenant.set(key, entry);
    }
    const counters: AtomicWrite[] = [];
    const others = new Map<string, number>();
    for (const { tenant, delta, grows } of byTenant.values()) {
      if (delta === 0 && grows <= 0) continue;
      if (grows > 0) others.set(usageId(tenant), await this.elsewhere(tenant));
      const room = this.limit - grows - (others.get(usageId(tenant)) ?? 0);
      const filter: Filter = { id: usageId(tenant), ...(grows > 0 && { bytes: { $lte: room } }) };
      counters.push({ op: "update", collection: this.usage, scope: tenant, filter, update: { $inc: { bytes: delta } } });
    }
    if (counters.length === 0) return this.store.atomically(writes);
    for (let tries = 0; ; tries += 1) {
      const written = await this.store.atomically([...writes, ...counters]);
      if (written) return written.slice(0, writes.length);
      // Which part lost: a counter missing or full, or one of the writes' own conditions.
      let missing = false;
      for (const { tenant, grows } of byTenant.values()) {
        const row = await this.usage.get(tenant, usageId(tenant));
        const bytes = (row?.bytes ?? 0) + (others.get(usageId(tenant)) ?? 0);
        if (!row) missing = true;
        else if (grows > 0 && bytes + grows > this.limit) throw storageQuotaExceeded(this.limit, bytes);
      }
      if (missing) await Promise.all([...byTenant.values()].map(({ tenant }) => this.usage.increment(usageDoc(tenant), { bytes: 0 })));
      else if (writes.some((w) => w.op === "update")) return null;
      else if (tries >= TRIES) throw new ApiError("service_unavailable", "The storage counter kept changing; retry", { retry_after: 1 });
    }
  }

  /** Gives back the bytes of documents deleted (after their delete: a crash between leaves the counter high by them). */
  async release(docs: Obj[], policy: StoragePolicy): Promise<void> {
    const byTenant = new Map<string, { tenant: Required<Tenant>; bytes: number }>();
    for (const doc of docs) {
      const tenant = tenantOf(doc);
      if (!tenant) continue;
      const entry = byTenant.get(usageId(tenant)) ?? { tenant, bytes: 0 };
      entry.bytes += storedSize(doc, policy.volatile);
      byTenant.set(usageId(tenant), entry);
    }
    await Promise.all(
      [...byTenant.values()].map(({ tenant, bytes }) =>
        this.usage.increment(usageDoc(tenant), { bytes: -bytes }).catch((err: unknown) => {
          process.emitWarning(`storage quota: ${bytes} bytes deleted of ${usageId(tenant)} stay counted: ${(err as Error).message}`);
        }),
      ),
    );
  }
}

/** A counted collection: reads as the collection; writes also change their tenant's counter. */
class CountedCollection<T extends Doc> implements Collection<T> {
  readonly name: string;

  constructor(
    private readonly inner: Collection<T>,
    private readonly policy: StoragePolicy,
    private readonly accounting: StorageAccounting,
  ) {
    this.name = inner.name;
  }

  get(scope: Scope, id: string): Promise<T | null> {
    return this.inner.get(scope, id);
  }
  findOne(scope: Scope, filter: Filter, options?: Pick<FindOptions, "sort">): Promise<T | null> {
    return this.inner.findOne(scope, filter, options);
  }
  find(scope: Scope, filter: Filter, options?: FindOptions): Promise<T[]> {
    return this.inner.find(scope, filter, options);
  }
  pluck<K extends keyof T & string>(scope: Scope, filter: Filter, fields: readonly K[], options?: FindOptions): Promise<Pick<T, K>[]> {
    return this.inner.pluck(scope, filter, fields, options);
  }
  count(scope: Scope, filter: Filter, options?: Pick<FindOptions, "limit">): Promise<number> {
    return this.inner.count(scope, filter, options);
  }
  page(scope: Scope, filter: Filter, options: FindOptions) {
    return this.inner.page(scope, filter, options);
  }

  async insert(doc: T): Promise<T> {
    const measured = await this.accounting.measure([{ op: "insert", collection: this.inner, doc }]);
    await this.accounting.apply(measured!.writes, measured!.changes);
    return doc;
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    if (volatileOnly(update, this.policy.volatile)) return this.inner.update(scope, filter, update, options);
    // The document the update would take, read first to measure what it changes; if another write
    // changed it meanwhile so that it no longer matches, the next match is taken, as the store would.
    for (let tries = 0; tries < TRIES; tries += 1) {
      const target = (await this.inner.findOne(scope, filter, options)) as (T & Obj) | null;
      if (!target) return null;
      const tenant = tenantOf(target);
      const after = applyUpdate(structuredClone(target), update);
      const delta = storedSize(after, this.policy.volatile) - storedSize(target, this.policy.volatile);
      const written = await this.accounting.apply(
        [{ op: "update", collection: this.inner, scope, filter: { ...filter, id: target.id }, update }],
        tenant ? [{ tenant, delta, checked: false }] : [],
      );
      if (written) return written[0] as T;
    }
    return null;
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    if (volatileOnly(update, this.policy.volatile)) return this.inner.updateMany(scope, filter, update);
    const ids = (await this.inner.pluck(scope, filter, ["id"] as (keyof T & string)[])) as { id: string }[];
    let changed = 0;
    for (const { id } of ids) if (await this.update(scope, { ...filter, id }, update)) changed += 1;
    return changed;
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    const doc = await this.inner.delete(scope, filter);
    if (doc) await this.accounting.release([doc as unknown as Obj], this.policy);
    return doc;
  }

  /**
   * A batch of BATCH documents read, then deleted by one statement through the `id` index; their
   * bytes are given back. When a concurrent delete (another node's retention pass) took some of the
   * batch, which ones is not known: the smallest as many as went here are given back, so the counter
   * errs high (less room), never low.
   */
  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    let removed = 0;
    for (;;) {
      const batch = (await this.inner.find(scope, filter, { limit: BATCH })) as unknown as Obj[];
      if (batch.length === 0) return removed;
      const gone = await this.inner.deleteMany(scope, { ...filter, id: { $in: batch.map((d) => d.id) } });
      const sized = batch.map((doc) => ({ doc, size: storedSize(doc, this.policy.volatile) }));
      if (gone < batch.length) sized.sort((a, b) => a.size - b.size);
      await this.accounting.release(
        sized.slice(0, gone).map((s) => s.doc),
        this.policy,
      );
      removed += gone;
      if (batch.length < BATCH || gone === 0) return removed;
    }
  }

  /** Counters of a counted collection change by a few digits: not measured. */
  increment(doc: T, inc: Record<string, number>): Promise<void> {
    return this.inner.increment(doc, inc);
  }
}
