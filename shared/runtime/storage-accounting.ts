import {
  insertChecked,
  measureFields,
  STORAGE_COUNTING_SERVICES,
  STORAGE_POLICIES,
  storageUsageSpec,
  storageQuotaExceeded,
  storedSize,
  tenantOf,
  usageDoc,
  usageId,
  volatileOnly,
  volatileSize,
  type StoragePolicy,
  type StorageUsageDoc,
} from "../records/storage-quota";
import { ApiError } from "../errors";
import { parseJson } from "../api/json-parse";
import { applyUpdate } from "../storage/update";
import { CountedCollection, type Accounting, type Change, type Obj } from "./counted-collection";

export type { Change, Obj };
import type { AtomicWrite, Collection, Doc, Filter, Store, Tenant, Update } from "../storage/types";

/** How long the other services' counts of a tenant, once read, are used for its checks. */
const ELSEWHERE_MS = 1000;
/** Tenants whose other counts are remembered at once (a process serving more reads them again). */
const SEEN_MAX = 10_000;
/** How often changes of unchecked collections are stored (see `StorageAccounting.defer`). */
const FLUSH_MS = 100;
/** Tries of a write whose compare-and-set lost to a concurrent write, before answering it lost. */
const TRIES = 5;

/** What `update` changes of the size of the document whose JSON text is `text`, and the document after it. */
function sizeChange(text: string, update: Update, volatile: readonly string[]): { delta: number; after: Obj } {
  const before = parseJson(text) as Obj;
  const beforeSize = text.length - volatileSize(before, volatile);
  const after = applyUpdate(before, update);
  return { delta: storedSize(after, volatile) - beforeSize, after };
}

/**
 * Keeps each tenant's storage counters (shared/records/storage-quota.ts) in step with its documents:
 * an insert or update of a counted collection and the change of its tenant's counter row (this
 * service's) are one `atomically`. An insert into a `checked` collection carries the condition that
 * this row plus the tenant's rows of the other services (read at most once per ELSEWHERE_MS) stay
 * within the quota: exact among this service's writers; across services, over by at most what the
 * others stored meanwhile.
 */
export class StorageAccounting implements Accounting {
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

  /** The other services' counts per tenant as last read, and when. */
  private readonly seen = new Map<string, { at: number; bytes: number }>();

  /**
   * The bytes the other services count for `tenant`, read at most once per ELSEWHERE_MS (a check
   * on the hot path then reads no row but its own).
   */
  private async elsewhere(tenant: Required<Tenant>): Promise<number> {
    const key = usageId(tenant);
    const now = Date.now();
    const known = this.seen.get(key);
    if (known && now - known.at < ELSEWHERE_MS) return known.bytes;
    const rows = await Promise.all(this.others.map((c) => c.get(tenant, key)));
    const bytes = rows.reduce((sum, row) => sum + (row?.bytes ?? 0), 0);
    if (this.seen.size >= SEEN_MAX) this.seen.clear();
    this.seen.set(key, { at: now, bytes });
    return bytes;
  }

  /** Deferred changes being stored by `flush` right now, per tenant. */
  private readonly inFlight = new Map<string, number>();
  /** This service's row per tenant as last read, kept up with what this node has stored since. */
  private readonly ownSeen = new Map<string, { at: number; bytes: number }>();

  /**
   * Throws `quota_exceeded` when `tenant` stores its quota or more: this service's row and the
   * other services' (each read at most once per ELSEWHERE_MS, this node's own stored changes added
   * as they are stored) and what this node has counted and not stored yet. A start then reads no
   * row on the hot path; a tenant passes its quota by at most what other nodes stored within
   * ELSEWHERE_MS, as with checked writes.
   */
  async check(tenant: Required<Tenant>): Promise<void> {
    const key = usageId(tenant);
    const now = Date.now();
    let own = this.ownSeen.get(key);
    if (!own || now - own.at >= ELSEWHERE_MS) {
      own = { at: now, bytes: (await this.usage.get(tenant, key))?.bytes ?? 0 };
      if (this.ownSeen.size >= SEEN_MAX) this.ownSeen.clear();
      this.ownSeen.set(key, own);
    }
    const bytes = own.bytes + (await this.elsewhere(tenant)) + (this.pending.get(key)?.delta ?? 0) + (this.inFlight.get(key) ?? 0);
    if (bytes >= this.limit) throw storageQuotaExceeded(this.limit, bytes);
  }

  /** What `check` last read of this service's row for the tenant, moved by a change this node stored. */
  private stored(tenant: Required<Tenant>, delta: number): void {
    const own = this.ownSeen.get(usageId(tenant));
    if (own) own.bytes += delta;
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
  async measure(writes: AtomicWrite[]): Promise<{ writes: AtomicWrite[]; changes: Change[]; stored: (() => void)[] } | null> {
    const changes: Change[] = [];
    const stored: (() => void)[] = [];
    const out: AtomicWrite[] = [];
    for (const write of writes) {
      const policy = STORAGE_POLICIES[write.collection.name];
      if (!policy) {
        out.push(write);
        continue;
      }
      if (write.op === "insert") {
        const doc = write.doc as unknown as Obj;
        const tenant = tenantOf(doc);
        const { size, fields } = measureFields(doc, policy.volatile);
        if (tenant) changes.push({ tenant, delta: size, checked: insertChecked(policy, doc) });
        if (write.collection instanceof CountedCollection) {
          const counted = write.collection;
          stored.push(() => counted.inserted(doc, fields));
        }
        out.push(write);
        continue;
      }
      if (volatileOnly(write.update, policy.volatile)) {
        out.push(write);
        continue;
      }
      const before = (await write.collection.findOne(write.scope, write.filter)) as Obj | null;
      if (!before) return null;
      const tenant = tenantOf(before);
      if (tenant) changes.push({ tenant, delta: sizeChange(JSON.stringify(before), write.update, policy.volatile).delta, checked: false });
      out.push({ ...write, filter: { ...write.filter, id: before.id as string } });
    }
    return { writes: out, changes, stored };
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
    const deferred: { tenant: Required<Tenant>; delta: number }[] = [];
    for (const { tenant, delta, grows } of byTenant.values()) {
      if (delta === 0 && grows <= 0) continue;
      if (grows <= 0) {
        deferred.push({ tenant, delta });
        continue;
      }
      // What this node counted and has not stored yet counts here as stored.
      others.set(usageId(tenant), (await this.elsewhere(tenant)) + (this.pending.get(usageId(tenant))?.delta ?? 0));
      const room = this.limit - grows - (others.get(usageId(tenant)) ?? 0);
      const filter: Filter = { id: usageId(tenant), ...(grows > 0 && { bytes: { $lte: room } }) };
      counters.push({ op: "update", collection: this.usage, scope: tenant, filter, update: { $inc: { bytes: delta } } });
    }
    if (counters.length === 0) {
      const written = await (writes.length === 1 ? alone(writes[0]) : this.store.atomically(writes));
      if (written) this.defer(deferred);
      return written;
    }
    for (let tries = 0; ; tries += 1) {
      const written = await this.store.atomically([...writes, ...counters]);
      if (written) {
        for (const { tenant, delta, grows } of byTenant.values()) if (grows > 0) this.stored(tenant, delta);
        this.defer(deferred);
        return written.slice(0, writes.length);
      }
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

  /** Unchecked changes counted and not stored yet, per tenant (see `defer`). */
  private readonly pending = new Map<string, { tenant: Required<Tenant>; delta: number }>();
  private flushing: ReturnType<typeof setTimeout> | undefined;
  private flushed: Promise<void> = Promise.resolve();

  /**
   * Changes no check waits for (runs, deliveries, audit entries: counted, never refused) are added
   * up here and stored once per FLUSH_MS per tenant, not in each document's write: on the hot path
   * a run's writes then carry no counter write. A node that crashes loses what it had not stored
   * yet (its last FLUSH_MS of them): the counter errs low by that.
   */
  private defer(changes: { tenant: Required<Tenant>; delta: number }[]): void {
    for (const { tenant, delta } of changes) {
      const key = usageId(tenant);
      const entry = this.pending.get(key) ?? { tenant, delta: 0 };
      entry.delta += delta;
      this.pending.set(key, entry);
    }
    if (this.pending.size > 0 && !this.flushing) {
      this.flushing = setTimeout(() => void this.flush(), FLUSH_MS);
      this.flushing.unref();
    }
  }

  /** Stores the deferred changes (one increment per tenant); those that fail are kept for the next. */
  flush(): Promise<void> {
    this.flushed = this.flushed.then(async () => {
      if (this.flushing) clearTimeout(this.flushing);
      this.flushing = undefined;
      const batch = [...this.pending.values()];
      this.pending.clear();
      for (const entry of batch) this.inFlight.set(usageId(entry.tenant), entry.delta);
      const failed = (
        await Promise.all(
          batch.map((entry) =>
            entry.delta === 0
              ? null
              : this.usage.increment(usageDoc(entry.tenant), { bytes: entry.delta }).then(
                  () => (this.stored(entry.tenant, entry.delta), null),
                  () => entry,
                ),
          ),
        )
      ).filter((e) => e !== null);
      this.inFlight.clear();
      if (failed.length > 0) this.defer(failed);
    });
    return this.flushed;
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

/**
 * One write with no counter to change alongside (its change deferred): stored by itself, as
 * `atomically` would store it, without a transaction around it.
 */
async function alone(write: AtomicWrite): Promise<Doc[] | null> {
  const collection = write.collection instanceof CountedCollection ? write.collection.uncounted : write.collection;
  if (write.op === "insert") return [await collection.insert(write.doc)];
  const doc = await collection.update(write.scope, write.filter, write.update);
  return doc ? [doc] : null;
}
