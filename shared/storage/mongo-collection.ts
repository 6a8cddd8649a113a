import type mongoose from "mongoose";
import { OPERATION_TIMEOUT_MS } from "./mongo-client";
import { fromStored, limitOf, plucked, storedFilter, storedSort, storedUpdate, toStored } from "./mongo-docs";
import { unavailableReason } from "./mongo-errors";
import {
  buildFailureMessage,
  conflictMessage,
  indexName,
  legacyMessage,
  planIndexes,
  type IndexPlan,
  type IndexToCreate,
  type StoredIndex,
} from "./mongo-indexes";
import { checkUpdate, scoped } from "./scope";
import type { AtomicWrite, Collection, Doc, Filter, FindOptions, IndexSpec, Page, Scope, Update } from "./types";

type Raw = Record<string, unknown>;
export type Db = mongoose.mongo.Db;
export type Session = mongoose.mongo.ClientSession;
type Driver = mongoose.mongo.Collection<Raw>;

/** What a collection asks of its store (mongoose.ts). */
export interface CollectionHost {
  /** The database, connected, or a failure (503 while unreachable). */
  db(): Promise<Db>;
  /** One operation of a collection, counted until it ends, its failures mapped (mongo-errors.ts). */
  run<R>(collection: string, op: (db: Db) => Promise<R>): Promise<R>;
  /** `work` in one transaction (see MongooseStore.transaction). */
  transaction<R>(work: (session: Session) => Promise<R>): Promise<R>;
  /** Makes the store refuse every operation, and opened(), with `message`. */
  refuse(message: string): never;
  warn(message: string): void;
}

/** A promise made once, made again on the next call if it failed (a server not reachable yet). */
export function retried<T>(make: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= make().catch((err: unknown) => {
      pending = undefined;
      throw err;
    });
    return pending;
  };
}

/** On every operation outside a transaction: MongoDB stops working on it past this (503). */
const TIME_LIMIT = { maxTimeMS: OPERATION_TIMEOUT_MS } as const;

/** One collection, through the driver that mongoose's connection holds. */
export class MongoCollection<T extends Doc> implements Collection<T> {
  private readonly specs = new Map<string, IndexSpec>();
  /** Whether the indexes declared so far have been looked at (or are being). */
  private looked = false;
  inspected: () => Promise<IndexPlan> = () => Promise.reject(new Error("not declared"));
  /** The unique indexes, which writes wait for; the others are built meanwhile. */
  private indexed: () => Promise<void> = () => Promise.resolve();
  private backgroundIndexed: () => Promise<void> = () => Promise.resolve();

  constructor(
    readonly name: string,
    private readonly store: CollectionHost,
    indexes: IndexSpec[],
  ) {
    this.declare(indexes);
  }

  /**
   * Declares indexes; what is new is looked at and built at once, in the background. Reads never
   * wait for it; writes wait for the unique indexes (in place before the first write runs), and go
   * on without an index MongoDB refused to build, which is reported when refused.
   */
  declare(indexes: IndexSpec[]): void {
    const before = this.specs.size;
    for (const spec of indexes) this.specs.set(indexName(spec), spec);
    if (this.specs.size === before && this.looked) return;
    this.looked = true;
    this.inspected = retried(async () => {
      const db = await this.store.db();
      const existing = (await this.driver(db)
        .listIndexes()
        .toArray()
        .catch((err: unknown) => {
          if ((err as { code?: number }).code === 26) return []; // NamespaceNotFound: not created yet
          throw err;
        })) as StoredIndex[];
      const plan = planIndexes([...this.specs.values()], existing);
      if (plan.legacy) this.store.refuse(legacyMessage(this.name));
      for (const conflict of plan.conflicts) this.store.warn(conflictMessage(this.name, conflict));
      return plan;
    });
    this.indexed = retried(async () => this.build((await this.inspected()).create.filter((i) => i.unique)));
    // After the unique ones: one createIndexes at a time per collection.
    this.backgroundIndexed = retried(async () => {
      await this.indexed().catch(() => undefined);
      await this.build((await this.inspected()).create.filter((i) => !i.unique));
    });
    this.indexed().catch(() => undefined);
    this.backgroundIndexed().catch(() => undefined);
  }

  /**
   * Builds `indexes`. Unreachable: fails, and the next write tries again. Refused (duplicates under
   * a new unique index, a conflict another node made meanwhile): reported once, never as a
   * duplicate of some write, and the collection works without them.
   */
  private async build(indexes: IndexToCreate[]): Promise<void> {
    if (indexes.length === 0) return;
    try {
      await this.driver(await this.store.db()).createIndexes(indexes);
    } catch (err) {
      if (unavailableReason(err) !== undefined) throw err;
      this.store.warn(buildFailureMessage(this.name, indexes, err));
    }
  }

  private driver(db: Db): Driver {
    return db.collection<Raw>(this.name);
  }

  private read<R>(op: (c: Driver) => Promise<R>): Promise<R> {
    return this.store.run(this.name, async (db) => op(this.driver(db)));
  }

  private write<R>(op: (c: Driver) => Promise<R>): Promise<R> {
    return this.store.run(this.name, async (db) => {
      this.backgroundIndexed().catch(() => undefined);
      await this.indexed();
      return op(this.driver(db));
    });
  }

  async insert(doc: T): Promise<T> {
    const stored = toStored(doc);
    return this.write(async (c) => {
      await c.insertOne(stored, TIME_LIMIT);
      return doc;
    });
  }

  get(scope: Scope, id: string): Promise<T | null> {
    return this.findOne(scope, { id });
  }

  async findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const query = storedFilter(scoped(scope, filter));
    return this.read(async (c) => fromStored<T>(await c.findOne(query, { sort: storedSort(options.sort), ...TIME_LIMIT })));
  }

  private cursor(c: Driver, scope: Scope, filter: Filter, options: FindOptions, projection?: Raw) {
    const limit = limitOf(options.limit);
    return c.find(storedFilter(scoped(scope, filter)), {
      sort: storedSort(options.sort),
      ...TIME_LIMIT,
      ...(options.skip && { skip: options.skip }),
      ...(typeof limit === "number" && { limit }),
      ...(projection && { projection }),
    });
  }

  async find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    scoped(scope, filter);
    if (limitOf(options.limit) === "none") return [];
    return this.read(async (c) => (await this.cursor(c, scope, filter, options).toArray()).map((raw) => fromStored<T>(raw)!));
  }

  async pluck<K extends keyof T & string>(
    scope: Scope,
    filter: Filter,
    fields: readonly K[],
    options: FindOptions = {},
  ): Promise<Pick<T, K>[]> {
    scoped(scope, filter);
    if (limitOf(options.limit) === "none") return [];
    const projection = Object.fromEntries([["_id", 0], ...fields.map((f) => [f === "id" ? "_id" : f, 1])]);
    return this.read(async (c) =>
      (await this.cursor(c, scope, filter, options, projection).toArray()).map((raw) => plucked(raw, fields) as Pick<T, K>),
    );
  }

  async count(scope: Scope, filter: Filter, options: Pick<FindOptions, "limit"> = {}): Promise<number> {
    const query = storedFilter(scoped(scope, filter));
    const limit = limitOf(options.limit);
    if (limit === "none") return 0;
    return this.read((c) => c.countDocuments(query, { ...TIME_LIMIT, ...(typeof limit === "number" && { limit }) }));
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const query = storedFilter(scoped(scope, filter));
    const changes = storedUpdate(checkUpdate(update));
    return this.write(async (c) =>
      fromStored<T>(await c.findOneAndUpdate(query, changes, { sort: storedSort(options.sort), returnDocument: "after", ...TIME_LIMIT })),
    );
  }

  /** In a transaction, as the embedded store's is: a refusal on the tenth document undoes the nine before it. */
  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    const query = storedFilter(scoped(scope, filter));
    const changes = storedUpdate(checkUpdate(update));
    // Matched, not modified: the embedded store counts every document it matched, and both agree.
    return this.write((c) => this.store.transaction(async (session) => (await c.updateMany(query, changes, { session })).matchedCount));
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    const query = storedFilter(scoped(scope, filter));
    return this.write(async (c) => fromStored<T>(await c.findOneAndDelete(query, TIME_LIMIT)));
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    const query = storedFilter(scoped(scope, filter));
    return this.write(async (c) => (await c.deleteMany(query, TIME_LIMIT)).deletedCount);
  }

  async increment(doc: T, inc: Record<string, number>): Promise<void> {
    const counts = checkUpdate({ $inc: inc }).$inc ?? {};
    const stored = toStored(doc);
    // The counter's identity: a document of another tenant with this id is not it (and its `_id`
    // then refuses the insert: DuplicateKeyError).
    const key: Raw = { _id: stored._id, org_id: doc.org_id, environment: doc.environment ?? { $exists: false } };
    // What the upsert creates beside the key (from the filter) and the counters (from `$inc`).
    const touches = (field: string) => Object.keys(counts).some((path) => path === field || path.startsWith(`${field}.`));
    const rest = Object.fromEntries(Object.entries(stored).filter(([field]) => !(field in key) && !touches(field)));
    const change: Raw = { ...(Object.keys(rest).length > 0 && { $setOnInsert: rest }), $inc: counts };
    return this.write(async (c) => {
      for (let tries = 0; ; tries += 1) {
        try {
          await c.updateOne(key, change, { upsert: true, ...TIME_LIMIT });
          return;
        } catch (err) {
          // Two upserts raced to create it: the second finds it now. A second refusal: the id is
          // another tenant's.
          if ((err as { code?: number }).code !== 11000 || tries > 0) throw err;
        }
      }
    });
  }

  /** For `MongooseStore.atomically`: the indexes in place before its transaction. */
  prepare(): Promise<void> {
    return this.indexed();
  }

  /** For `MongooseStore.atomically`: one write inside its transaction (null: an update matched nothing). */
  async writeIn(db: Db, session: Session, write: AtomicWrite, update: Raw | undefined): Promise<Doc | null> {
    const c = this.driver(db);
    if (write.op === "insert") {
      await c.insertOne(toStored(write.doc), { session });
      return write.doc;
    }
    const query = storedFilter(scoped(write.scope, write.filter));
    return fromStored<Doc>(await c.findOneAndUpdate(query, update!, { session, returnDocument: "after" }));
  }
}
