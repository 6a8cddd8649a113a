import mongoose, { Schema, type Connection, type Model } from "mongoose";
import { ApiError, DuplicateKeyError } from "../errors";
import { checkUpdate, scoped } from "./scope";
import { COLLECTION_NAME, type Collection, type Doc, type Filter, type FindOptions, type IndexSpec, type Page, type Scope, type Store, type Update } from "./types";

type Raw = Record<string, unknown>;

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

  async insert(doc: T): Promise<T> {
    await this.indexed();
    try {
      // The driver directly: the schema is empty, there is nothing for mongoose to cast, and the
      // copy keeps the `_id` the driver adds out of the caller's object.
      await this.model.collection.insertOne({ ...doc });
    } catch (err) {
      duplicate(this.name, err);
    }
    return doc;
  }

  async get(scope: Scope, id: string): Promise<T | null> {
    await this.indexed();
    return this.model.findOne(scoped(scope, { id }), WITHOUT_ID).lean<T>().exec();
  }

  async findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    await this.indexed();
    const query = this.model.findOne(scoped(scope, filter), WITHOUT_ID);
    if (options.sort) query.sort(options.sort);
    return query.lean<T>().exec();
  }

  async find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    await this.indexed();
    const query = this.model.find(scoped(scope, filter), WITHOUT_ID);
    if (options.sort) query.sort(options.sort);
    if (options.skip) query.skip(options.skip);
    if (options.limit) query.limit(options.limit);
    return query.lean<T[]>().exec();
  }

  async count(scope: Scope, filter: Filter): Promise<number> {
    await this.indexed();
    return this.model.countDocuments(scoped(scope, filter)).exec();
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    await this.indexed();
    checkUpdate(update);
    try {
      return await this.model
        .findOneAndUpdate(scoped(scope, filter), update, { sort: options.sort, returnDocument: "after", projection: WITHOUT_ID })
        .lean<T>()
        .exec();
    } catch (err) {
      return duplicate(this.name, err);
    }
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    await this.indexed();
    checkUpdate(update);
    try {
      // Matched, not modified: nedb counts every document it matched, and both engines must agree.
      return (await this.model.updateMany(scoped(scope, filter), update).exec()).matchedCount;
    } catch (err) {
      return duplicate(this.name, err);
    }
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    await this.indexed();
    return this.model.findOneAndDelete(scoped(scope, filter), { projection: WITHOUT_ID }).lean<T>().exec();
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    await this.indexed();
    return (await this.model.deleteMany(scoped(scope, filter)).exec()).deletedCount;
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
      const schema = new Schema({}, { strict: false, strictQuery: false, versionKey: false, collection: name, autoIndex: false, id: false });
      col = new MongooseCollection<T>(name, this.conn.model<Raw>(name, schema), this.connected, indexes);
      this.collections.set(name, col);
    } else {
      col.declare(indexes);
    }
    return col;
  }

  async close(): Promise<void> {
    await this.conn.close();
  }
}
