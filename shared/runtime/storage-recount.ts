import { DuplicateKeyError } from "../errors";
import { STORAGE_POLICIES, storageUsageSpec, type StorageUsageDoc } from "../records/storage-quota";
import { ALL_TENANTS, openCollection, type Collection, type Doc, type ReadView, type Store } from "../storage/types";
import { addSizes, counterFixes, fixTenant, type CounterFix, type CounterRow, type TenantBytes } from "./storage-recount.logic";

/**
 * Setting the storage counters (shared/records/storage-quota.ts) right from the documents
 * themselves, for `npm run cli -- storage recount` with the platform stopped: data stored before
 * the counters existed (an upgrade), or counters a crash left low or high, are not in the counters,
 * and no write of the running platform ever measures them again.
 */

/**
 * Documents read at once. Each is at most 1 MiB (the body limit; most are a few KiB), so a batch
 * holds at most this many MiB whatever the size of the collection.
 */
export const RECOUNT_BATCH = 100;

/** The command to run, as the warning at a service's start and the docs name it. */
export const RECOUNT_COMMAND = "npm run cli -- storage recount";

/** What a recount found and did for one service's counters. */
export interface ServiceRecount {
  service: string;
  /** The service's counter collection. */
  counters: string;
  /** Its counted collections, read. */
  collections: string[];
  /** Documents read. */
  documents: number;
  /** The rows set, created or removed (or that would be, with `dryRun`). */
  fixes: CounterFix[];
}

/** A counter row changed by someone else meanwhile: a platform is running on this store. */
export class RecountConflict extends Error {}

/** Every document of `collection`, `size` at a time in `id` order (through the id index: the store's key). */
async function* batches<T extends Doc>(collection: ReadView<T>, size: number): AsyncGenerator<T[]> {
  let after: string | undefined;
  for (;;) {
    const batch = await collection.find(ALL_TENANTS, after === undefined ? {} : { id: { $gt: after } }, { sort: { id: 1 }, limit: size });
    if (batch.length > 0) yield batch;
    if (batch.length < size) return;
    after = batch[batch.length - 1].id;
  }
}

/**
 * Recounts the counters of `service` from its counted `collections`: sums each document's size per
 * tenant, then sets each of the service's counter rows to its tenant's sum (creating rows, removing
 * those of tenants with nothing left). What is held in memory is one batch and one sum per tenant.
 */
export async function recountService(
  store: Pick<Store, "collection">,
  service: string,
  collections: readonly string[],
  options: { dryRun?: boolean; batch?: number } = {},
): Promise<ServiceRecount> {
  const size = options.batch ?? RECOUNT_BATCH;
  const sums = new Map<string, TenantBytes>();
  let documents = 0;
  for (const name of collections) {
    const policy = STORAGE_POLICIES[name];
    if (!policy) throw new Error(`storage recount: '${name}' is not a counted collection`);
    for await (const batch of batches(store.collection<Doc>(name), size)) {
      addSizes(sums, batch as unknown as Record<string, unknown>[], policy);
      documents += batch.length;
    }
  }
  const usage = openCollection(store, storageUsageSpec(service));
  const rows: CounterRow[] = [];
  for await (const batch of batches(usage, size))
    for (const { id, org_id, environment, bytes } of batch) rows.push({ id, org_id, environment, bytes });
  const fixes = counterFixes(sums, rows);
  if (!options.dryRun) await applyFixes(store, service, fixes);
  return { service, counters: usage.name, collections: [...collections], documents, fixes };
}

/** Writes `fixes` to the counters of `service`, one row at a time (see `applyFix`). */
export async function applyFixes(store: Pick<Store, "collection">, service: string, fixes: readonly CounterFix[]): Promise<void> {
  const usage = openCollection(store, storageUsageSpec(service));
  for (const fix of fixes) await applyFix(usage, fix);
}

/**
 * One row set, created or removed; each compares its row with what was read, so a platform writing
 * the counters meanwhile is found out instead of overwritten.
 */
async function applyFix(usage: Collection<StorageUsageDoc>, fix: CounterFix): Promise<void> {
  const conflict = () =>
    new RecountConflict(
      `the counter ${usage.name} ${fix.id} changed while it was recounted: is the platform running on this store? Stop it and run the recount again`,
    );
  if (fix.before === null) {
    try {
      await usage.insert({ id: fix.id, ...fixTenant(fix), bytes: fix.after ?? 0 });
    } catch (err) {
      throw err instanceof DuplicateKeyError ? conflict() : err;
    }
    return;
  }
  const filter = { id: fix.id, ...(Number.isFinite(fix.before) && { bytes: fix.before }) };
  const done =
    fix.after === null
      ? await usage.delete(fixTenant(fix), filter)
      : await usage.update(fixTenant(fix), filter, { $set: { bytes: fix.after } });
  if (!done) throw conflict();
}

/**
 * The counted collections among `counted` that hold a tenant's documents while the counter
 * collection `usage` has no row at all: data stored before the counters existed (an upgrade), or
 * counters removed. Two reads of at most one row each per collection.
 */
export async function uncountedCollections(usage: ReadView<StorageUsageDoc>, counted: readonly ReadView<Doc>[]): Promise<string[]> {
  if ((await usage.count(ALL_TENANTS, {}, { limit: 1 })) > 0) return [];
  const holding = await Promise.all(
    counted.map(async (c) => ((await c.count(ALL_TENANTS, { org_id: { $ne: null } }, { limit: 1 })) > 0 ? c.name : null)),
  );
  return holding.filter((name): name is string => name !== null);
}
