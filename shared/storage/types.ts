/**
 * The one storage interface every service uses. Adapters: the embedded store (SQLite through
 * `node:sqlite`, one database file under DATA_DIR that every process on the machine opens) and
 * MongoDB through mongoose (MONGO_URL).
 *
 * Tenancy is enforced by type: every query takes a `Scope`, either a tenant (organization, and
 * environment where the collection is per environment) that the adapter adds to the filter, or
 * the explicit `ALL_TENANTS` marker for the few system queries that must cross tenants (resolving
 * an API key by its digest, a dispatcher claiming due deliveries). A query without a scope does not
 * compile.
 *
 * Documents are plain JSON: timestamps are ISO strings (they sort as text), ids are strings in
 * the field `id` (the adapters keep their own internal keys out of sight).
 */
export type Environment = "live" | "test";

export interface Tenant {
  readonly org_id: string;
  readonly environment?: Environment;
}

export const ALL_TENANTS = Object.freeze({ all_tenants: true as const });
export type AllTenants = typeof ALL_TENANTS;
export type Scope = Tenant | AllTenants;

/** A stored document. Its values are JSON values: times are ISO strings or ms numbers, never Dates. */
export interface Doc {
  id: string;
  org_id: string;
  environment?: Environment;
}

/**
 * A MongoDB-style filter restricted to what both engines evaluate alike: equality of a field or a
 * dotted path with a scalar (a string, a finite number, a boolean; null also matches an absent
 * field; an array field is not searched element by element), and the operators `$in`, `$nin`, `$ne`, `$lt`, `$lte`, `$gt`, `$gte`, `$exists`.
 */
export type FilterValue =
  | string
  | number
  | boolean
  | null
  | {
      $in?: unknown[];
      $nin?: unknown[];
      $ne?: unknown;
      $lt?: unknown;
      $lte?: unknown;
      $gt?: unknown;
      $gte?: unknown;
      $exists?: boolean;
    };
export type Filter = Record<string, FilterValue>;

export type Sort = Record<string, 1 | -1>;

export interface FindOptions {
  sort?: Sort;
  skip?: number;
  limit?: number;
}

export interface Page<T> {
  items: T[];
  total: number;
}

/** `$set`, `$unset`, `$inc` and `$push` only: the operators both engines apply atomically. */
export interface Update {
  $set?: Record<string, unknown>;
  $unset?: Record<string, true>;
  $inc?: Record<string, number>;
  $push?: Record<string, unknown>;
}

/**
 * An index both engines build: on SQLite, an index on the JSON fields it names (`id`, `org_id` and
 * `environment` are real columns); a sparse one leaves out documents without its first field, so
 * "the few documents in some state" (pending deliveries' `due_at`) are found by a small index.
 */
export interface IndexSpec {
  fields: Record<string, 1 | -1>;
  unique?: boolean;
  /** Skip documents where the (first) field is missing; lets a unique index ignore absent values. */
  sparse?: boolean;
  /**
   * Skip documents where this top-level field (one the index names, holding numbers or strings) is
   * missing: a partial index, for a compound index whose first field every document has. A query
   * uses it only when it constrains the field (a range or an equality on it).
   */
  present?: string;
}

/**
 * The reading half of a collection: what a service gets for a collection another service owns
 * (shared/runtime/store.mixin.ts). Only the owner writes; the others ask it over the broker.
 */
export interface ReadView<T extends Doc> {
  readonly name: string;
  get(scope: Scope, id: string): Promise<T | null>;
  findOne(scope: Scope, filter: Filter, options?: Pick<FindOptions, "sort">): Promise<T | null>;
  find(scope: Scope, filter: Filter, options?: FindOptions): Promise<T[]>;
  /**
   * Only `fields` of each match, in order (strings and numbers: what an index orders by): a read
   * that parses no document, for picking which matches to load (a sweep shared among nodes).
   */
  pluck<K extends keyof T & string>(scope: Scope, filter: Filter, fields: readonly K[], options?: FindOptions): Promise<Pick<T, K>[]>;
  /**
   * How many documents match; with `limit`, counts at most that many (a bounded read through the
   * index, so a list can say "more than N" without visiting every match).
   */
  count(scope: Scope, filter: Filter, options?: Pick<FindOptions, "limit">): Promise<number>;
  /** One page and the total count of matches. */
  page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>>;
}

export interface Collection<T extends Doc> extends ReadView<T> {
  /** Inserts one document; a unique index violation raises `DuplicateKeyError`. */
  insert(doc: T): Promise<T>;
  /**
   * Atomic compare-and-set: applies `update` to one document that matches `filter` at the moment
   * of the write, and returns it as updated, or null when none matched. With `sort`, the first
   * match in that order is taken (to claim the oldest due job). Two concurrent calls whose filter
   * excludes the other's result (e.g. `{status: "queued"}` → `$set: {status: "running"}`) can never
   * both succeed. The update may not change `id`, `org_id` or `environment`.
   */
  update(scope: Scope, filter: Filter, update: Update, options?: Pick<FindOptions, "sort">): Promise<T | null>;
  updateMany(scope: Scope, filter: Filter, update: Update): Promise<number>;
  /** Deletes one matching document and returns it, or null. */
  delete(scope: Scope, filter: Filter): Promise<T | null>;
  deleteMany(scope: Scope, filter: Filter): Promise<number>;
  /**
   * Adds `inc` to numeric fields of the document `doc.id`, atomically (increments from any number of
   * processes at once all count), creating it as `doc` first when it does not exist (a field `doc`
   * lacks starts at 0). For counters: `doc` carries the counter's identity, never the counts. A
   * document with that id in another tenant raises `DuplicateKeyError`.
   */
  increment(doc: T, inc: Record<string, number>): Promise<void>;
}

/** Collection names: lower-case words, safe both as file names under DATA_DIR and in MongoDB. */
export const COLLECTION_NAME = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * A collection as a service declares it (shared/runtime/store.mixin.ts): its name and its indexes, and the
 * type of its documents. Every service that opens the collection names the same spec.
 */
export interface CollectionSpec<T extends Doc> {
  readonly name: string;
  readonly indexes: IndexSpec[];
  /** Never set: carries the documents' type. */
  readonly doc?: T;
}

export const collectionSpec = <T extends Doc>(name: string, indexes: IndexSpec[] = []): CollectionSpec<T> => ({ name, indexes });

/** The collection of a spec, straight from a store (tools and tests; services get theirs from StoreMixin). */
export const openCollection = <T extends Doc>(store: Pick<Store, "collection">, spec: CollectionSpec<T>): Collection<T> =>
  store.collection<T>(spec.name, spec.indexes);

/** One write of `Store.atomically`. */
export type AtomicWrite =
  | { op: "insert"; collection: Collection<any>; doc: Doc }
  | { op: "update"; collection: Collection<any>; scope: Scope; filter: Filter; update: Update };

export interface Store {
  /**
   * The collection `name` (matching `COLLECTION_NAME`); its indexes are created once (idempotently)
   * before its first operation.
   */
  collection<T extends Doc>(name: string, indexes?: IndexSpec[]): Collection<T>;
  /**
   * Applies the writes in order, all or none: a state change and the event that records it (the
   * outbox) are stored together or not at all. An update that matches no document undoes the writes
   * before it and answers null (a compare-and-set that lost); a refused write (a unique index, a
   * store failure) undoes them and throws. Else answers each write's document (as inserted, or as
   * updated). Collections must come from this store.
   */
  atomically(writes: AtomicWrite[]): Promise<Doc[] | null>;
  /**
   * One small real write (an upsert of one row or document of the store's own `_probe`), the way
   * every write goes: resolves once it is stored, fails as a write would (`storage_unavailable` on
   * a full disk or an unreachable MongoDB). For readiness checks; it never touches a collection.
   */
  probe(): Promise<void>;
  /**
   * Resolves once the store is known usable, or known unreachable for now (its operations answer
   * 503 meanwhile); rejects, saying how to fix it, when it cannot be used as configured (MongoDB
   * without a replica set, documents of an earlier layout). A process does not start then.
   */
  opened(): Promise<void>;
  close(): Promise<void>;
}

/** What a service holds of the store beside its collections: writes across them, and the probe. */
export type OwnStore = Pick<Store, "atomically" | "probe"> & {
  /**
   * Refuses (`quota_exceeded`, storage_bytes) when the tenant already stores its quota or more: for
   * work whose own writes are counted, never checked, such as a run started through the API.
   */
  checkStorageQuota(tenant: Required<Tenant>): Promise<void>;
};
