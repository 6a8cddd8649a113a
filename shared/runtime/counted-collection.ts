import { storedSize, tenantOf, volatileOnly, volatileSize, type StoragePolicy } from "../records/storage-quota";
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

type Recent = { version: unknown; size: number; text?: string; doc?: Obj };

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
   * Of a versioned collection: documents as this process last wrote them, by id, with their
   * measured size (as JSON text after an insert; as the object this class made after an update).
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
    const text = JSON.stringify(doc);
    const size = text.length - volatileSize(doc as unknown as Obj, this.policy.volatile);
    await this.accounting.apply(
      [{ op: "insert", collection: this.inner, doc }],
      tenant ? [{ tenant, delta: size, checked: this.policy.checked }] : [],
    );
    this.inserted(doc as unknown as Obj, size, text);
    return doc;
  }

  /** After `doc` was stored (here or through `atomically`): remembered, in a versioned collection. */
  inserted(doc: Obj, size: number, text: string): void {
    if (this.policy.version) this.remember(doc.id as string, { version: doc[this.policy.version], size, text });
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    if (volatileOnly(update, this.policy.volatile)) return this.inner.update(scope, filter, update, options);
    // The document the update would take, read first to measure what it changes (unless this
    // process wrote it last, at the version the filter pins); if another write changed it meanwhile
    // so that it no longer matches, the next match is taken, as the store would.
    for (let tries = 0; tries < TRIES; tries += 1) {
      const known = this.known(filter);
      let before: Obj;
      let beforeSize: number;
      if (known) {
        this.recent.delete(filter.id as string);
        before = known.doc ?? (JSON.parse(known.text as string) as Obj);
        beforeSize = known.size;
      } else {
        const target = (await this.inner.findOne(scope, filter, options)) as Obj | null;
        if (!target) return null;
        before = target;
        beforeSize = storedSize(target, this.policy.volatile);
      }
      const id = before.id as string;
      const after = applyUpdate(before, update);
      const afterSize = storedSize(after, this.policy.volatile);
      const tenant = tenantOf(after);
      const written = await this.accounting.apply(
        [{ op: "update", collection: this.inner, scope, filter: { ...filter, id }, update }],
        tenant ? [{ tenant, delta: afterSize - beforeSize, checked: false }] : [],
      );
      if (written) {
        if (this.policy.version) this.remember(id, { version: after[this.policy.version], size: afterSize, doc: after });
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
