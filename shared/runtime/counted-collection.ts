import {
  insertChecked,
  measureFields,
  sizeChangeOf,
  storedSize,
  tenantOf,
  volatileOnly,
  type FieldSizes,
  type StoragePolicy,
} from "../records/storage-quota";
import { applyUpdate } from "../storage/update";
import type { AtomicWrite, Collection, Doc, Filter, FindOptions, Scope, Tenant, Update } from "../storage/types";

export type Obj = Record<string, unknown>;

export type Change = { tenant: Required<Tenant>; delta: number; checked: boolean };

/** What a counted collection asks of its service's storage accounting (storage-accounting.ts). */
export interface Accounting {
  /** The writes and their tenants' counter changes as one `atomically`; null when a checked one is over the quota. */
  apply(writes: AtomicWrite[], changes: Change[]): Promise<Doc[] | null>;
  /** Gives the bytes of deleted documents back to their tenants. */
  release(docs: Obj[], policy: StoragePolicy): Promise<void>;
}

/** Tries of an update whose document changed between its measure and its write. */
const TRIES = 5;
/** Documents a `deleteMany` of a counted collection reads and deletes at once. */
const BATCH = 256;
/** Documents of a versioned collection remembered as last written here, at most (the oldest go first). */
const RECENT_MAX = 1024;

type Recent = { version: unknown; tenant: Required<Tenant> | null; fields: FieldSizes };

/** A counted collection: reads as the collection; writes also change their tenant's counter. */
export class CountedCollection<T extends Doc> implements Collection<T> {
  readonly name: string;

  constructor(
    private readonly inner: Collection<T>,
    private readonly policy: StoragePolicy,
    private readonly accounting: Accounting,
  ) {
    this.name = inner.name;
  }

  /** The collection itself, its writes not counted (for a write whose count is taken care of). */
  get uncounted(): Collection<T> {
    return this.inner;
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

  /**
   * Of a versioned collection: documents as this process last wrote them, by id: their version,
   * tenant and the size of each field (numbers only, so nothing of the documents is kept alive).
   */
  private readonly recent = new Map<string, Recent>();

  private remember(id: string, entry: Recent): void {
    if (!this.policy.version) return;
    this.recent.delete(id);
    if (this.recent.size >= RECENT_MAX) this.recent.delete(this.recent.keys().next().value as string);
    this.recent.set(id, entry);
  }

  /** What this process last wrote of the document `filter` pins by id and version, if at that version. */
  private known(filter: Filter): Recent | undefined {
    const field = this.policy.version;
    if (!field || typeof filter.id !== "string" || filter[field] === undefined) return undefined;
    const entry = this.recent.get(filter.id);
    return entry && entry.version === filter[field] ? entry : undefined;
  }

  async insert(doc: T): Promise<T> {
    const tenant = tenantOf(doc as unknown as Obj);
    const { size, fields } = measureFields(doc as unknown as Obj, this.policy.volatile);
    await this.accounting.apply(
      [{ op: "insert", collection: this.inner, doc }],
      tenant ? [{ tenant, delta: size, checked: insertChecked(this.policy, doc as unknown as Obj) }] : [],
    );
    this.inserted(doc as unknown as Obj, fields);
    return doc;
  }

  /** After `doc` was stored (here or through `atomically`): remembered, in a versioned collection. */
  inserted(doc: Obj, fields: FieldSizes): void {
    if (this.policy.version) this.remember(doc.id as string, { version: doc[this.policy.version], tenant: tenantOf(doc), fields });
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const { volatile, version } = this.policy;
    if (volatileOnly(update, volatile)) return this.inner.update(scope, filter, update, options);
    for (let tries = 0; tries < TRIES; tries += 1) {
      // A document this process wrote last, at the version the filter pins, and an update of whole
      // fields: measured from what the update writes, nothing read.
      const known = this.known(filter);
      const change = known && sizeChangeOf(known.fields, update, volatile);
      if (known && change) {
        this.recent.delete(filter.id as string);
        const written = await this.accounting.apply(
          [{ op: "update", collection: this.inner, scope, filter, update }],
          known.tenant ? [{ tenant: known.tenant, delta: change.delta, checked: false }] : [],
        );
        if (!written) return null;
        const next = version && update.$set?.[version];
        if (next !== undefined) this.remember(filter.id as string, { version: next, tenant: known.tenant, fields: change.fields });
        return written[0] as T;
      }
      // Else the document the update would take is read first to measure what it changes; if
      // another write changed it meanwhile so that it no longer matches, the next match is taken,
      // as the store would.
      const before = (await this.inner.findOne(scope, filter, options)) as Obj | null;
      if (!before) return null;
      const id = before.id as string;
      const beforeSize = storedSize(before, volatile);
      // applyUpdate changes the document it is given.
      const after = applyUpdate(before, update);
      const measured = measureFields(after, volatile);
      const tenant = tenantOf(after);
      const written = await this.accounting.apply(
        [{ op: "update", collection: this.inner, scope, filter: { ...filter, id }, update }],
        tenant ? [{ tenant, delta: measured.size - beforeSize, checked: false }] : [],
      );
      if (written) {
        if (version) this.remember(id, { version: after[version], tenant, fields: measured.fields });
        return written[0] as T;
      }
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
    if (doc) this.recent.delete(doc.id);
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
