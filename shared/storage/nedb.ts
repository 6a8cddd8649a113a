import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Datastore from "@seald-io/nedb";
import { DuplicateKeyError } from "../errors";
import { checkUpdate, scoped } from "./scope";
import type { Collection, Doc, Filter, FindOptions, IndexSpec, Page, Scope, Store, Update } from "./types";

const COMPACT_EVERY_MS = 10 * 60 * 1000;
const CLAIM_ROUNDS = 5;
const CLAIM_BATCH = 8;

type Stored<T> = T & { _id: string };

function strip<T extends Doc>(doc: Stored<T> | null | undefined): T | null {
  if (!doc) return null;
  const { _id: _ignored, ...rest } = doc;
  return rest as unknown as T;
}

/** nedb indexes `_id` only by default, and `_id` is our `id`: query it there so lookups use the index. */
function q(scope: Scope, filter: Filter): Record<string, unknown> {
  const query = scoped(scope, filter);
  if ("id" in query) {
    query._id = query.id;
    delete query.id;
  }
  return query;
}

function duplicate(name: string, err: unknown): never {
  const e = err as { errorType?: string; key?: unknown };
  if (e?.errorType === "uniqueViolated") throw new DuplicateKeyError(name, e.key === undefined ? [] : [String(e.key)]);
  throw err;
}

class NedbCollection<T extends Doc> implements Collection<T> {
  private readonly ready: Promise<void>;

  constructor(
    readonly name: string,
    private readonly ds: Datastore<Stored<T>>,
    indexes: IndexSpec[],
  ) {
    this.ready = (async () => {
      await ds.loadDatabaseAsync();
      for (const index of indexes) await this.ensure(index);
      ds.setAutocompactionInterval(COMPACT_EVERY_MS);
    })();
    // An unobserved failure would surface on the first operation anyway.
    this.ready.catch(() => undefined);
  }

  async ensure(index: IndexSpec): Promise<void> {
    const fields = Object.keys(index.fields);
    await this.ds.ensureIndexAsync({
      fieldName: fields.length === 1 ? fields[0] : fields,
      unique: index.unique ?? false,
      sparse: index.sparse ?? false,
    });
  }

  async insert(doc: T): Promise<T> {
    await this.ready;
    try {
      await this.ds.insertAsync({ ...doc, _id: doc.id } as Stored<T>);
    } catch (err) {
      duplicate(this.name, err);
    }
    return doc;
  }

  async get(scope: Scope, id: string): Promise<T | null> {
    await this.ready;
    return strip(await this.ds.findOneAsync(q(scope, { id }) as never));
  }

  async findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const [first] = await this.find(scope, filter, { ...options, limit: 1 });
    return first ?? null;
  }

  async find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    await this.ready;
    let cursor = this.ds.findAsync(q(scope, filter) as never);
    if (options.sort) cursor = cursor.sort(options.sort);
    if (options.skip) cursor = cursor.skip(options.skip);
    if (options.limit) cursor = cursor.limit(options.limit);
    const docs = (await cursor) as Stored<T>[];
    return docs.map((d) => strip(d) as T);
  }

  async count(scope: Scope, filter: Filter): Promise<number> {
    await this.ready;
    return this.ds.countAsync(q(scope, filter) as never);
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    await this.ready;
    checkUpdate(update);
    const query = q(scope, filter);
    if (!options.sort) return this.updateOne(query, update);
    // nedb updates take no sort: pick candidates in order, then compare-and-set each one; the
    // filter is evaluated again inside nedb's serialized update, so a taken candidate misses.
    for (let round = 0; round < CLAIM_ROUNDS; round += 1) {
      const candidates = (await this.ds.findAsync(query as never, { _id: 1 } as never).sort(options.sort).limit(CLAIM_BATCH)) as Stored<T>[];
      if (candidates.length === 0) return null;
      for (const candidate of candidates) {
        const won = await this.updateOne({ ...query, _id: candidate._id }, update);
        if (won) return won;
      }
    }
    return null;
  }

  private async updateOne(query: Record<string, unknown>, update: Update): Promise<T | null> {
    try {
      const res = await this.ds.updateAsync(query as never, update as never, { multi: false, returnUpdatedDocs: true });
      return res.numAffected === 1 ? strip(res.affectedDocuments as Stored<T>) : null;
    } catch (err) {
      return duplicate(this.name, err);
    }
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    await this.ready;
    checkUpdate(update);
    try {
      const res = await this.ds.updateAsync(q(scope, filter) as never, update as never, { multi: true });
      return res.numAffected;
    } catch (err) {
      return duplicate(this.name, err);
    }
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    await this.ready;
    const query = q(scope, filter);
    // Find then remove by _id and the same filter, so a concurrent change between the two is seen.
    for (let round = 0; round < CLAIM_ROUNDS; round += 1) {
      const found = (await this.ds.findOneAsync(query as never)) as Stored<T> | null;
      if (!found) return null;
      const removed = await this.ds.removeAsync({ ...query, _id: found._id } as never, { multi: false });
      if (removed === 1) return strip(found);
    }
    return null;
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    await this.ready;
    return this.ds.removeAsync(q(scope, filter) as never, { multi: true });
  }

  async close(): Promise<void> {
    await this.ready.catch(() => undefined);
    this.ds.stopAutocompaction();
    await this.ds.compactDatafileAsync();
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The embedded store: one nedb file per collection under `dir`, owned by one process at a time. */
export class NedbStore implements Store {
  private readonly collections = new Map<string, NedbCollection<any>>();
  private readonly lockFile: string;

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    this.lockFile = join(dir, "store.lock");
    if (existsSync(this.lockFile)) {
      const owner = Number(readFileSync(this.lockFile, "utf8").trim());
      if (Number.isInteger(owner) && owner !== process.pid && processAlive(owner)) {
        throw new Error(`DATA_DIR ${dir} is in use by process ${owner}; stop it or point DATA_DIR elsewhere`);
      }
    }
    writeFileSync(this.lockFile, String(process.pid));
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name) as NedbCollection<T> | undefined;
    if (!col) {
      if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`invalid collection name '${name}'`);
      const ds = new Datastore<Stored<T>>({ filename: join(this.dir, `${name}.db`) });
      col = new NedbCollection<T>(name, ds, indexes);
      this.collections.set(name, col);
    } else {
      // A second user of the collection may declare more indexes; ensureIndex is idempotent.
      for (const index of indexes) void col.ensure(index).catch(() => undefined);
    }
    return col;
  }

  async close(): Promise<void> {
    await Promise.all([...this.collections.values()].map((c) => c.close()));
    this.collections.clear();
    try {
      if (readFileSync(this.lockFile, "utf8").trim() === String(process.pid)) rmSync(this.lockFile);
    } catch {
      // already gone
    }
  }
}
