import mongoose, { Schema, type Connection, type Model } from "mongoose";
import { DuplicateKeyError } from "../errors";
import { checkUpdate, scoped } from "./scope";
import type { Collection, Doc, Filter, FindOptions, IndexSpec, Page, Scope, Store, Update } from "./types";

const HIDDEN = { _id: 0 } as const;

function duplicate(name: string, err: unknown): never {
  const e = err as { code?: number; keyPattern?: Record<string, unknown> };
  if (e?.code === 11000) throw new DuplicateKeyError(name, Object.keys(e.keyPattern ?? {}));
  throw err;
}

class MongooseCollection<T extends Doc> implements Collection<T> {
  private readonly ready: Promise<unknown>;

  constructor(
    readonly name: string,
    private readonly model: Model<any>,
  ) {
    this.ready = model.createIndexes();
    this.ready.catch(() => undefined);
  }

  async insert(doc: T): Promise<T> {
    await this.ready;
    try {
      await this.model.collection.insertOne({ ...doc });
    } catch (err) {
      duplicate(this.name, err);
    }
    return doc;
  }

  async get(scope: Scope, id: string): Promise<T | null> {
    await this.ready;
    return this.model.findOne(scoped(scope, { id }), HIDDEN).lean<T>().exec();
  }

  async findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    await this.ready;
    let query = this.model.findOne(scoped(scope, filter), HIDDEN);
    if (options.sort) query = query.sort(options.sort);
    return query.lean<T>().exec();
  }

  async find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    await this.ready;
    let query = this.model.find(scoped(scope, filter), HIDDEN);
    if (options.sort) query = query.sort(options.sort);
    if (options.skip) query = query.skip(options.skip);
    if (options.limit) query = query.limit(options.limit);
    return query.lean<T[]>().exec();
  }

  async count(scope: Scope, filter: Filter): Promise<number> {
    await this.ready;
    return this.model.countDocuments(scoped(scope, filter)).exec();
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    await this.ready;
    checkUpdate(update);
    try {
      return await this.model
        .findOneAndUpdate(scoped(scope, filter), update, { sort: options.sort, returnDocument: "after", projection: HIDDEN, strict: false })
        .lean<T>()
        .exec();
    } catch (err) {
      return duplicate(this.name, err);
    }
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    await this.ready;
    checkUpdate(update);
    try {
      const res = await this.model.updateMany(scoped(scope, filter), update, { strict: false }).exec();
      return res.modifiedCount;
    } catch (err) {
      return duplicate(this.name, err);
    }
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    await this.ready;
    return this.model.findOneAndDelete(scoped(scope, filter), { projection: HIDDEN }).lean<T>().exec();
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    await this.ready;
    const res = await this.model.deleteMany(scoped(scope, filter)).exec();
    return res.deletedCount;
  }
}

/** MongoDB through mongoose: one schemaless model per collection, indexes declared on the schema. */
export class MongooseStore implements Store {
  private readonly conn: Connection;
  private readonly collections = new Map<string, MongooseCollection<any>>();

  constructor(url: string) {
    this.conn = mongoose.createConnection(url, { serverSelectionTimeoutMS: 10_000 });
    this.conn.on("error", () => undefined);
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name) as MongooseCollection<T> | undefined;
    if (!col) {
      const schema = new Schema({}, { strict: false, versionKey: false, collection: name, autoIndex: false, id: false });
      schema.index({ id: 1 }, { unique: true });
      for (const index of indexes) schema.index(index.fields, { unique: index.unique ?? false, sparse: index.sparse ?? false });
      col = new MongooseCollection<T>(name, this.conn.model(name, schema));
      this.collections.set(name, col);
    }
    return col;
  }

  async close(): Promise<void> {
    await this.conn.close();
  }
}
