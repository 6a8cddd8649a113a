import mongoose, { Schema, type ClientSession, type Connection, type Model } from "mongoose";
import { ApiError, DuplicateKeyError } from "../errors";
import { checkUpdate, scoped } from "./scope";
import {
  COLLECTION_NAME,
  type AtomicWrite,
  type Collection,
  type Doc,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type Page,
  type Scope,
  type Store,
  type Update,
} from "./types";

type Raw = Record<string, unknown>;

/**
 * MongoDB gives `.` and a leading `$` meaning in field names and BSON refuses NUL in them, but
 * documents hold free-form JSON (event `data`, run `input`) whose keys can be anything. So every
 * key is stored with `%`, `.`, `$` and NUL percent-encoded (and `__proto__` as `%5F_proto__`), and
 * decoded when read: the services' own field names hold none of these, so filters and update paths
 * are unchanged.
 */
// eslint-disable-next-line no-control-regex -- NUL is what BSON refuses in a field name
const SPECIAL_KEY = /[%.$\u0000]/g;
const encodeKey = (key: string): string =>
  key === "__proto__" ? "%5F_proto__" : key.replace(SPECIAL_KEY, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0").toUpperCase()}`);
const decodeKey = (key: string): string =>
  key.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));

/** A copy of `value` with every object key passed through `rename` (own properties defined, never assigned). */
function renameKeys(value: unknown, rename: (key: string) => string, needed: (key: string) => boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => renameKeys(v, rename, needed));
  if (value === null || typeof value !== "object" || value instanceof Date || (value as { _bsontype?: unknown })._bsontype !== undefined)
    return value;
  const out: Raw = {};
  for (const key of Object.keys(value)) {
    const v = renameKeys((value as Raw)[key], rename, needed);
    Object.defineProperty(out, needed(key) ? rename(key) : key, { value: v, writable: true, enumerable: true, configurable: true });
  }
  return out;
}
const needsEncoding = (key: string) => key === "__proto__" || /[%.$]/.test(key) || key.includes("\u0000");
const encodeDoc = <T>(value: T): T => renameKeys(value, encodeKey, needsEncoding) as T;
const decodeDoc = <T>(value: T): T => (value === null ? value : (renameKeys(value, decodeKey, (k) => k.includes("%")) as T));

/** An update whose values (not its paths, which the services write) have their keys encoded. */
function encodeUpdate(update: Update): Update {
  const out: Update = { ...update };
  if (update.$set) out.$set = Object.fromEntries(Object.entries(update.$set).map(([path, v]) => [path, encodeDoc(v)]));
  if (update.$push) out.$push = Object.fromEntries(Object.entries(update.$push).map(([path, v]) => [path, encodeDoc(v)]));
  return out;
}

/** A failure of MongoDB itself (unreachable, no primary, a write not acknowledged): retry later. */
function unavailable(err: unknown): never {
  const name = (err as { name?: string } | null)?.name ?? "";
  if (/^Mongo(Network|ServerSelection|NotPrimary|WriteConcern|Timeout)|^MongoPoolCleared/.test(name)) {
    throw new ApiError("storage_unavailable", "The store could not complete the operation (MongoDB is unreachable); retry later", {
      retry_after: 1,
      reason: "MongoDB is unreachable",
    });
  }
  throw err;
}

/** Our documents carry their own `id`; MongoDB's `_id` stays out of every answer. */
const WITHOUT_ID = { _id: 0 } as const;

function duplicate(collection: string, err: unknown): never {
  const e = err as { code?: number; keyPattern?: Record<string, unknown> };
  if (e?.code === 11000) throw new DuplicateKeyError(collection, Object.keys(e.keyPattern ?? {}));
  throw err;
}

/** A promise made once, made again on the next call if it failed (a server not reachable yet). */
function retried(make: () => Promise<unknown>): () => Promise<unknown> {
  let pending: Promise<unknown> | undefined;
  return () => {
    pending ??= make().catch((err: unknown) => {
      pending = undefined;
      throw err;
    });
    return pending;
  };
}

class MongooseCollection<T extends Doc> implements Collection<T> {
  private readonly declared = new Set<string>();
  private indexed: () => Promise<unknown>;

  constructor(
    readonly name: string,
    private readonly model: Model<Raw>,
    private readonly connected: () => Promise<unknown>,
    indexes: IndexSpec[],
  ) {
    this.indexed = this.indexer();
    this.declare([{ fields: { id: 1 }, unique: true }, ...indexes]);
  }

  private indexer(): () => Promise<unknown> {
    return retried(async () => {
      await this.connected();
      await this.model.createIndexes();
    });
  }

  /** Declares indexes on the schema; they are created before the next operation. */
  declare(indexes: IndexSpec[]): void {
    let added = false;
    for (const index of indexes) {
      const key = JSON.stringify([index.fields, index.unique ?? false, index.sparse ?? false]);
      if (this.declared.has(key)) continue;
      this.declared.add(key);
      this.model.schema.index(index.fields, { unique: index.unique ?? false, sparse: index.sparse ?? false });
      added = true;
    }
    // createIndexes is idempotent: running it again creates only what is new.
    if (added) this.indexed = this.indexer();
  }

  /** Runs one operation once the indexes exist, with MongoDB's refusals and failures mapped. */
  private async run<R>(op: () => Promise<R>): Promise<R> {
    try {
      await this.indexed();
      return await op();
    } catch (err) {
      if ((err as { code?: number })?.code === 11000) duplicate(this.name, err);
      return unavailable(err);
    }
  }

  insert(doc: T): Promise<T> {
    // The driver directly: the schema is empty, there is nothing for mongoose to cast, and the
    // encoded copy keeps the `_id` the driver adds out of the caller's object.
    return this.run(async () => {
      await this.model.collection.insertOne(encodeDoc(doc) as Raw);
      return doc;
    });
  }

  get(scope: Scope, id: string): Promise<T | null> {
    return this.run(async () => decodeDoc(await this.model.findOne(scoped(scope, { id }), WITHOUT_ID).lean<T>().exec()));
  }

  findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    return this.run(async () => {
      const query = this.model.findOne(scoped(scope, filter), WITHOUT_ID);
      if (options.sort) query.sort(options.sort);
      return decodeDoc(await query.lean<T>().exec());
    });
  }

  find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    return this.run(async () => {
      const query = this.model.find(scoped(scope, filter), WITHOUT_ID);
      if (options.sort) query.sort(options.sort);
      if (options.skip) query.skip(options.skip);
      if (options.limit) query.limit(options.limit);
      return (await query.lean<T[]>().exec()).map((doc) => decodeDoc(doc));
    });
  }

  pluck<K extends keyof T & string>(scope: Scope, filter: Filter, fields: readonly K[], options: FindOptions = {}): Promise<Pick<T, K>[]> {
    return this.run(async () => {
      const query = this.model.find(scoped(scope, filter), { ...WITHOUT_ID, ...Object.fromEntries(fields.map((f) => [f, 1])) });
      if (options.sort) query.sort(options.sort);
      if (options.skip) query.skip(options.skip);
      if (options.limit) query.limit(options.limit);
      return (await query.lean<Pick<T, K>[]>().exec()).map((doc) => decodeDoc(doc));
    });
  }

  count(scope: Scope, filter: Filter, options: Pick<FindOptions, "limit"> = {}): Promise<number> {
    if (options.limit !== undefined)
      return this.run(() => this.model.collection.countDocuments(scoped(scope, filter), { limit: options.limit }));
    return this.run(() => this.model.countDocuments(scoped(scope, filter)).exec());
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    checkUpdate(update);
    return this.run(async () => {
      const doc = await this.model.collection.findOneAndUpdate(scoped(scope, filter), encodeUpdate(update) as Raw, {
        sort: options.sort,
        returnDocument: "after",
        projection: WITHOUT_ID,
      });
      return decodeDoc(doc as T | null);
    });
  }

  updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    checkUpdate(update);
    // Matched, not modified: the embedded store counts every document it matched, and both agree.
    return this.run(async () => (await this.model.collection.updateMany(scoped(scope, filter), encodeUpdate(update) as Raw)).matchedCount);
  }

  delete(scope: Scope, filter: Filter): Promise<T | null> {
    return this.run(async () =>
      decodeDoc(await this.model.findOneAndDelete(scoped(scope, filter), { projection: WITHOUT_ID }).lean<T>().exec()),
    );
  }

  deleteMany(scope: Scope, filter: Filter): Promise<number> {
    return this.run(async () => (await this.model.deleteMany(scoped(scope, filter)).exec()).deletedCount);
  }

  /** For `MongooseStore.atomically`: one write inside its transaction's session (null: no match). */
  async write(write: AtomicWrite, session: ClientSession): Promise<Doc | null> {
    await this.indexed();
    if (write.op === "insert") {
      await this.model.collection.insertOne(encodeDoc(write.doc) as unknown as Raw, { session });
      return write.doc;
    }
    const doc = await this.model.collection.findOneAndUpdate(scoped(write.scope, write.filter), encodeUpdate(write.update) as Raw, {
      session,
      returnDocument: "after",
      projection: WITHOUT_ID,
    });
    return decodeDoc(doc as Doc | null);
  }

  /** Maps MongoDB's refusals and failures as every operation does. */
  failed(err: unknown): never {
    if ((err as { code?: number })?.code === 11000) duplicate(this.name, err);
    return unavailable(err);
  }

  increment(doc: T, inc: Record<string, number>): Promise<void> {
    checkUpdate({ $inc: inc });
    const key: Raw = { id: doc.id, org_id: doc.org_id, ...(doc.environment !== undefined && { environment: doc.environment }) };
    // What the upsert creates beside the key (from the filter) and the counters (from `$inc`).
    const rest = Object.fromEntries(Object.entries(encodeDoc(doc) as Raw).filter(([field]) => !(field in key) && !(field in inc)));
    return this.run(async () => {
      for (let tries = 0; ; tries += 1) {
        try {
          await this.model.collection.updateOne(key, { $setOnInsert: rest, $inc: inc }, { upsert: true });
          return;
        } catch (err) {
          // Two upserts raced to create it: the second finds it now. A second refusal: the id is
          // another tenant's (mapped to DuplicateKeyError).
          if ((err as { code?: number }).code !== 11000 || tries > 0) throw err;
        }
      }
    });
  }
}

/** MongoDB through mongoose: one schemaless model per collection, indexes declared on its schema. */
export class MongooseStore implements Store {
  private readonly conn: Connection;
  private readonly collections = new Map<string, MongooseCollection<any>>();
  /** mongoose never retries a failed first connection by itself: the next operation does. */
  private readonly connected: () => Promise<unknown>;

  constructor(url: string) {
    this.conn = mongoose.createConnection();
    // Without a listener a connection error would crash the process; operations report it instead.
    this.conn.on("error", () => undefined);
    this.connected = retried(() => this.conn.openUri(url, { serverSelectionTimeoutMS: 10_000 }));
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name) as MongooseCollection<T> | undefined;
    if (!col) {
      if (!COLLECTION_NAME.test(name)) throw new ApiError("internal_error", `storage: invalid collection name '${name}'`);
      // The schema declares no paths: `strict: false` keeps every field, and `strictQuery: false`
      // (whatever mongoose's global default) keeps every filter field, which a strict query would
      // silently drop, widening an update to any document. Indexes are created by the collection
      // before its first operation, not in the background (autoIndex), so a failure surfaces there.
      const schema = new Schema(
        {},
        { strict: false, strictQuery: false, versionKey: false, collection: name, autoIndex: false, id: false },
      );
      col = new MongooseCollection<T>(name, this.conn.model<Raw>(name, schema), this.connected, indexes);
      this.collections.set(name, col);
    } else {
      col.declare(indexes);
    }
    return col;
  }

  /**
   * In one multi-document transaction (MongoDB needs a replica set for those: docker-compose runs a
   * single-node one). A lost compare-and-set aborts it and answers null.
   */
  async atomically(writes: AtomicWrite[]): Promise<Doc[] | null> {
    // By name: a caller may hold a wrapper of the collection (an instrumented store in tests).
    const collections = writes.map((w) => {
      const col = this.collections.get(w.collection.name) as MongooseCollection<Doc> | undefined;
      if (!col) throw new ApiError("internal_error", `storage: '${w.collection.name}' is not a collection of this store`);
      if (w.op === "update") checkUpdate(w.update);
      return col;
    });
    await this.connected().catch((err: unknown) => unavailable(err));
    const session = await this.conn.startSession();
    let out: Doc[] | null = null;
    try {
      await session.withTransaction(async () => {
        const done: Doc[] = [];
        for (const [i, write] of writes.entries()) {
          const doc = await collections[i].write(write, session);
          if (!doc) {
            out = null;
            await session.abortTransaction();
            return;
          }
          done.push(doc);
        }
        out = done;
      });
      return out;
    } catch (err) {
      return collections[0].failed(err);
    } finally {
      await session.endSession();
    }
  }

  /** A small real write: one document of `_probe` upserted (acknowledged like every write); fails as a write would. */
  async probe(): Promise<void> {
    try {
      await this.connected();
      await this.conn
        .collection<{ _id: string; at: Date }>("_probe")
        .updateOne({ _id: "probe" }, { $set: { at: new Date() } }, { upsert: true });
    } catch (err) {
      unavailable(err);
    }
  }

  async close(): Promise<void> {
    await this.conn.close();
  }
}
