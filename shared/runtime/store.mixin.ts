import type { ServiceBroker, ServiceSchema } from "moleculer";
import { Outbox, outboxSpec, type OutboxRow } from "./outbox";
import { DEFAULT_STORAGE_QUOTA_BYTES } from "../config";
import type { PlatformSettings } from "./platform";
import { StorageAccounting } from "./storage-accounting";
import { RECOUNT_COMMAND, uncountedCollections } from "./storage-recount";
import { STORAGE_POLICIES, storageUsageSpec } from "../records/storage-quota";
import {
  ALL_TENANTS,
  type AtomicWrite,
  type Collection,
  type CollectionSpec,
  type Doc,
  type OwnStore,
  type ReadView,
  type Store,
} from "../storage/types";

type Specs = Record<string, CollectionSpec<any>>;
type DocOf<S> = S extends CollectionSpec<infer T> ? T : never;

/**
 * What a service declares about the store, in one place: the collections it owns (it alone writes
 * them) and those it only reads, each under the name of the service variable that holds it; and
 * whether it records events with its state changes (`outbox`: see shared/runtime/outbox.ts).
 */
export interface StoreDeclaration<O extends Specs = Specs, R extends Specs = Specs> {
  owns: O;
  reads?: R;
  outbox?: boolean;
}

export type { OwnStore };

/** The variables `StoreMixin(declaration)` gives a service, typed: a write to a collection it only reads does not compile. */
export type StoreVars<D extends StoreDeclaration> = { store: OwnStore } & { [K in keyof D["owns"]]: Collection<DocOf<D["owns"][K]>> } & {
  [K in keyof NonNullable<D["reads"]>]: ReadView<DocOf<NonNullable<D["reads"]>[K]>>;
} & (D["outbox"] extends true ? { outbox: Outbox } : unknown);

/** A declaration, its literal type kept (`outbox: true`) for `StoreVars<typeof declaration>`. */
export const declareStore = <const D extends StoreDeclaration>(declaration: D): D => declaration;

const declarations = new WeakMap<object, StoreDeclaration>();

/** The collections a service schema declares through its store mixin (for the ownership test and tools). */
export function declarationOf(schema: Partial<ServiceSchema>): { owns: string[]; reads: string[] } | null {
  for (const mixin of [schema, ...((schema.mixins ?? []) as object[])]) {
    const d = declarations.get(mixin);
    if (d) return { owns: ownedNames(schema.name ?? "", d), reads: Object.values(d.reads ?? {}).map((s) => s.name) };
  }
  return null;
}

const ownedNames = (service: string, d: StoreDeclaration): string[] => [
  ...Object.values(d.owns).map((s) => s.name),
  ...(d.outbox ? [outboxSpec(service).name] : []),
  ...(counts(d) ? [storageUsageSpec(service).name] : []),
];

/** Whether a service owns collections counted against the storage quota (then it owns its counters too). */
const counts = (d: StoreDeclaration): boolean => Object.values(d.owns).some((s) => s.name in STORAGE_POLICIES);

/** Which service owns which collection, per broker: a second owner of a collection is refused at its creation. */
const owners = new WeakMap<ServiceBroker, Map<string, string>>();

function claim(broker: ServiceBroker, service: string, names: string[]): void {
  let map = owners.get(broker);
  if (!map) owners.set(broker, (map = new Map()));
  for (const name of names) {
    const owner = map.get(name);
    if (owner !== undefined && owner !== service)
      throw new Error(`store: collection '${name}' is owned by the ${owner} service; ${service} may only read it`);
  }
  for (const name of names) map.set(name, service);
}

function unclaim(broker: ServiceBroker, service: string): void {
  const map = owners.get(broker);
  for (const [name, owner] of map ?? []) if (owner === service) map?.delete(name);
}

/** Only the reading methods, bound: what a service gets for a collection it does not own. */
function readView<T extends Doc>(c: Collection<T>): ReadView<T> {
  return Object.freeze({
    name: c.name,
    get: c.get.bind(c),
    findOne: c.findOne.bind(c),
    find: c.find.bind(c),
    pluck: c.pluck.bind(c),
    count: c.count.bind(c),
    page: c.page.bind(c),
  });
}

/**
 * `atomically` over the service's own collections only: a write to any other is refused before it
 * starts. Writes of counted collections change their tenants' storage counters in the same step.
 */
function ownStore(store: Store, service: string, owned: Set<string>, accounting: StorageAccounting): OwnStore {
  return Object.freeze({
    async atomically(writes: AtomicWrite[]) {
      const foreign = writes.find((w) => !owned.has(w.collection.name));
      if (foreign) throw new Error(`store: the ${service} service does not own '${foreign.collection.name}'`);
      const measured = await accounting.measure(writes);
      const written = measured && (await accounting.apply(measured.writes, measured.changes));
      if (written) for (const stored of measured.stored) stored();
      return written;
    },
    probe: () => store.probe(),
    checkStorageQuota: (tenant) => accounting.check(tenant),
  });
}

/**
 * Applies the schema (table, columns, indexes) of every collection the service declares, owned and
 * read, before the service serves anything: an adapter creates a collection's schema before its
 * first operation, through the writer, so without this the first read of a collection after a
 * start waits on a write, and on a full disk (where every write fails) answers 503. Here, the one
 * lookup of a missing id per collection is that first operation; it fails the start if the schema
 * cannot be applied (a new collection on a full disk), which says so at once instead of on reads.
 */
async function applySchemas(collections: ReadView<Doc>[]): Promise<void> {
  await Promise.all(collections.map((c) => c.findOne(ALL_TENANTS, { id: "" })));
}

/**
 * One warning when a service starts with counted collections holding documents and no counter row
 * at all: data stored before the counters existed (an upgrade), which no write ever counts again.
 * Only a warning: the service runs, its tenants' usage counted low by what is not counted.
 */
async function warnUncounted(
  service: { logger: { warn(...args: unknown[]): void } },
  declaration: StoreDeclaration,
  accounting: StorageAccounting,
): Promise<void> {
  const vars = service as unknown as Record<string, ReadView<Doc>>;
  const counted = Object.entries(declaration.owns)
    .filter(([, spec]) => spec.name in STORAGE_POLICIES)
    .map(([key]) => vars[key]);
  if (counted.length === 0) return;
  const names = await uncountedCollections(accounting.usage, counted);
  if (names.length === 0) return;
  service.logger.warn(
    `storage quota: ${names.join(", ")} hold documents that ${accounting.usage.name} does not count (data from before the quota, or counters removed): its tenants can store that much beyond their quota until '${RECOUNT_COMMAND}' is run with the platform stopped (docs/security/storage-quota.md)`,
  );
}

/** Each service's storage accounting, to store what it has counted when the service stops. */
const accountings = new WeakMap<object, StorageAccounting>();

/** Every collection a service holds, for `applySchemas`. */
const held = new WeakMap<object, ReadView<Doc>[]>();

/**
 * Gives a service its collections, as declared: those it owns as collections, those it reads as
 * read-only views (no write methods at all, so a write there neither compiles nor runs), `store`
 * for atomic writes of its own collections, and with `outbox` its event outbox and relay. One owner
 * per collection: a second service of the broker declaring itself owner of a collection fails to
 * start, and test/integration/ownership.test.ts checks every service's declarations are disjoint.
 * Writes of collections counted against the storage quota change their tenant's counters, kept in
 * a collection the service owns (shared/runtime/storage-accounting.ts).
 */
export function StoreMixin(declaration: StoreDeclaration): Partial<ServiceSchema> {
  const mixin: Partial<ServiceSchema> = {
    created() {
      const service = this.name;
      const settings = this.settings as PlatformSettings;
      const store = settings.store.acquire();
      const accounting = new StorageAccounting(store, settings.config?.storageQuotaBytes ?? DEFAULT_STORAGE_QUOTA_BYTES, service);
      const vars = this as unknown as Record<string, unknown>;
      const owned = new Set(ownedNames(service, declaration));
      claim(this.broker, service, [...owned]);
      const all: ReadView<Doc>[] = counts(declaration) ? [accounting.usage, ...accounting.others] : [];
      for (const [key, spec] of Object.entries(declaration.owns))
        all.push((vars[key] = accounting.wrap(store.collection(spec.name, spec.indexes))));
      for (const [key, spec] of Object.entries(declaration.reads ?? {}))
        all.push((vars[key] = readView(store.collection(spec.name, spec.indexes))));
      // Awaited in started(): a store that cannot be used as configured stops the start, with its reason.
      const opened = store.opened();
      opened.catch(() => undefined);
      vars.storeOpened = opened;
      const own = ownStore(store, service, owned, accounting);
      vars.store = own;
      if (declaration.outbox) {
        const spec = outboxSpec(service);
        const rows = store.collection<OutboxRow>(spec.name, spec.indexes);
        all.push(rows);
        vars.outbox = new Outbox(own, rows, this.broker, this.logger);
      }
      held.set(this, all);
      accountings.set(this, accounting);
    },
    async started() {
      await (this as unknown as { storeOpened: Promise<void> }).storeOpened;
      await applySchemas(held.get(this) ?? []);
      const accounting = accountings.get(this);
      // Advisory: a store that cannot answer these reads fails the service's first request instead.
      if (accounting) await warnUncounted(this, declaration, accounting).catch(() => undefined);
      (this as unknown as { outbox?: Outbox }).outbox?.start();
    },
    async stopped() {
      await (this as unknown as { outbox?: Outbox }).outbox?.stop();
      await accountings.get(this)?.flush();
      unclaim(this.broker, this.name);
      await (this.settings as PlatformSettings).store.release();
    },
  };
  declarations.set(mixin, declaration);
  return mixin;
}
