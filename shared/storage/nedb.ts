import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import Datastore from "@seald-io/nedb";
import { ApiError, DuplicateKeyError } from "../errors";
import { GroupCommit } from "./nedb-commit";
import { patchNedbIndexes } from "./nedb-index";
import { checkUpdate, scoped } from "./scope";
import { COLLECTION_NAME, type Collection, type Doc, type Filter, type FindOptions, type IndexSpec, type Page, type Scope, type Store, type Update } from "./types";


patchNedbIndexes();
/** nedb's files are append-only; rewriting them now and then keeps them at the size of their data. */
const COMPACT_EVERY_MS = 10 * 60 * 1000;
/** Compare-and-set attempts of one sorted update before it reports "nothing to claim". */
const CLAIM_ATTEMPTS = 32;
/** Candidates fetched at a time by a sorted update. */
const CLAIM_BATCH = 8;

type Stored = Doc & { _id: string } & Record<string, unknown>;
type Query = Record<string, unknown>;

function strip<T extends Doc>(doc: Stored | null | undefined): T | null {
  if (!doc) return null;
  const { _id: _internal, ...rest } = doc;
  return rest as unknown as T;
}

/** nedb indexes `_id` always, and stores our `id` there too: filter on it so lookups use the index. */
function query(scope: Scope, filter: Filter): Query {
  const q = scoped(scope, filter);
  if ("id" in q) {
    q._id = q.id;
    delete q.id;
  }
  return q;
}

const closedError = () => new ApiError("service_unavailable", "The store is closed", { retry_after: 1 });

class NedbCollection<T extends Doc> implements Collection<T> {
  private ready: Promise<void>;
  private readonly unique: string[][] = [["id"]];
  private readonly declared = new Set<string>();
  private closed = false;
  private readonly commit: GroupCommit;

  constructor(
    readonly name: string,
    private readonly ds: Datastore<Stored>,
    indexes: IndexSpec[],
  ) {
    this.commit = GroupCommit.attach(ds);
    this.ready = ds.autoloadPromise ?? Promise.resolve();
    this.declare(indexes);
  }

  /** Adds indexes a (later) user of the collection declares; nedb also persists them in the file. */
  declare(indexes: IndexSpec[]): void {
    for (const index of indexes) {
      const fields = Object.keys(index.fields);
      const key = JSON.stringify([fields, index.unique ?? false, index.sparse ?? false]);
      if (this.declared.has(key)) continue;
      this.declared.add(key);
      if (index.unique) this.unique.push(fields);
      // nedb's planner uses a compound index only for a query that matches every one of its fields
      // exactly, which list and claim queries (a range, a sort) never do: such an index only slows
      // writes (events: 2.4k → 5.9k inserts/s without them). Unique ones stay: they are constraints.
      if (!index.unique && fields.length > 1) continue;
      this.ready = this.ready.then(() =>
        this.ds.ensureIndexAsync({ fieldName: fields.length === 1 ? fields[0] : fields, unique: index.unique ?? false, sparse: index.sparse ?? false }),
      );
    }
    // A failed load or index (duplicates already in the file) surfaces on every operation; until
    // one runs, it must not count as an unhandled rejection, which would end the process.
    this.ready.catch(() => undefined);
  }

  private async open(): Promise<void> {
    if (this.closed) throw closedError();
    await this.ready;
  }

  /** nedb reports the duplicated value, not the index: find which unique fields hold it. */
  private duplicate(err: unknown, doc?: Record<string, unknown>): never {
    const e = err as { errorType?: string; key?: unknown };
    if (e?.errorType !== "uniqueViolated") throw err;
    const key = e.key;
    let fields: string[] = [];
    if (key !== null && typeof key === "object") fields = Object.keys(key);
    else if (doc) fields = this.unique.find((f) => f.length === 1 && dotValue(doc, f[0]) === key) ?? [];
    throw new DuplicateKeyError(this.name, fields);
  }

  async insert(doc: T): Promise<T> {
    await this.open();
    try {
      await this.ds.insertAsync({ ...doc, _id: doc.id } as Stored);
    } catch (err) {
      this.duplicate(err, doc as unknown as Record<string, unknown>);
    }
    await this.commit.durable();
    return doc;
  }

  async get(scope: Scope, id: string): Promise<T | null> {
    await this.open();
    return strip<T>((await this.ds.findOneAsync(query(scope, { id }))) as unknown as Stored | null);
  }

  async findOne(scope: Scope, filter: Filter, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    const [first] = await this.find(scope, filter, { sort: options.sort, limit: 1 });
    return first ?? null;
  }

  async find(scope: Scope, filter: Filter, options: FindOptions = {}): Promise<T[]> {
    await this.open();
    let cursor = this.ds.findAsync(query(scope, filter));
    if (options.sort) cursor = cursor.sort(options.sort);
    if (options.skip) cursor = cursor.skip(options.skip);
    if (options.limit) cursor = cursor.limit(options.limit);
    const docs = (await cursor) as unknown as Stored[];
    return docs.map((d) => strip<T>(d) as T);
  }

  async count(scope: Scope, filter: Filter): Promise<number> {
    await this.open();
    return (await this.ds.countAsync(query(scope, filter))) as unknown as number;
  }

  async page(scope: Scope, filter: Filter, options: FindOptions): Promise<Page<T>> {
    const [items, total] = await Promise.all([this.find(scope, filter, options), this.count(scope, filter)]);
    return { items, total };
  }

  async update(scope: Scope, filter: Filter, update: Update, options: Pick<FindOptions, "sort"> = {}): Promise<T | null> {
    await this.open();
    checkUpdate(update);
    const q = query(scope, filter);
    // nedb evaluates an update's query inside its serialized executor: that alone is the CAS.
    if (!options.sort) return this.updateOne(q, update);
    // nedb's update takes no sort: take candidates in order, then set each one only if it still
    // matches; a candidate another writer took first misses, and the next one is tried.
    let attempts = 0;
    while (attempts < CLAIM_ATTEMPTS) {
      const candidates = (await this.ds.findAsync(q, { _id: 1 }).sort(options.sort).limit(CLAIM_BATCH)) as unknown as Stored[];
      if (candidates.length === 0) return null;
      for (const candidate of candidates) {
        attempts += 1;
        const won = await this.updateOne({ ...q, _id: candidate._id }, update);
        if (won) return won;
      }
    }
    return null;
  }

  private async updateOne(q: Query, update: Update): Promise<T | null> {
    try {
      const res = await this.ds.updateAsync(q, update, { multi: false, returnUpdatedDocs: true });
      if (res.numAffected !== 1) return null;
      await this.commit.durable();
      return strip<T>(res.affectedDocuments as unknown as Stored);
    } catch (err) {
      return this.duplicate(err);
    }
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    await this.open();
    checkUpdate(update);
    try {
      const { numAffected } = await this.ds.updateAsync(query(scope, filter), update, { multi: true });
      if (numAffected > 0) await this.commit.durable();
      return numAffected;
    } catch (err) {
      return this.duplicate(err);
    }
  }

  async delete(scope: Scope, filter: Filter): Promise<T | null> {
    await this.open();
    const q = query(scope, filter);
    // Find, then remove by id only if it still matches, so the document returned is the one removed.
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt += 1) {
      const found = (await this.ds.findOneAsync(q)) as unknown as Stored | null;
      if (!found) return null;
      if ((await this.ds.removeAsync({ ...q, _id: found._id }, { multi: false })) === 1) {
        await this.commit.durable();
        return strip<T>(found);
      }
    }
    return null;
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    await this.open();
    const removed = await this.ds.removeAsync(query(scope, filter), { multi: true });
    if (removed > 0) await this.commit.durable();
    return removed;
  }

  async compact(): Promise<void> {
    await this.ready;
    await this.ds.compactDatafileAsync();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // A collection that never loaded has nothing to write back.
    if (await this.ready.then(() => true, () => false)) await this.ds.compactDatafileAsync();
  }
}

function dotValue(doc: Record<string, unknown>, path: string): unknown {
  return path.split(".").reduce<unknown>((v, k) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), doc);
}

/** Data directories this process holds, so a second NedbStore here cannot open the same files. */
const heldDirs = new Set<string>();

function alive(pid: number): boolean {
  // 0 and negative pids would signal process groups, not a process.
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes `dir/store.lock` for this process. The pid is written to a private file that is then
 * hard-linked into place, so the lock appears atomically and always complete. A lock whose process
 * is gone (or that holds our own pid, left by an earlier container run as pid 1) is taken over.
 */
function takeLock(dir: string): string {
  const file = join(dir, "store.lock");
  if (heldDirs.has(dir)) throw new Error(`DATA_DIR ${dir} is already open in this process`);
  const mine = `${file}.${process.pid}`;
  writeFileSync(mine, `${process.pid}\n`);
  try {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      try {
        linkSync(mine, file);
        heldDirs.add(dir);
        return file;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const owner = lockOwner(file);
      // Released between our two steps: try to take it again.
      if (owner === undefined) continue;
      if (owner !== process.pid && alive(owner)) {
        throw new Error(`DATA_DIR ${dir} is in use by process ${owner} (lock file ${file}); stop it or use another DATA_DIR`);
      }
      rmSync(file, { force: true });
    }
    throw new Error(`DATA_DIR ${dir}: could not take the lock file ${file}`);
  } finally {
    rmSync(mine, { force: true });
  }
}

/** The pid in a lock file; NaN for an unreadable one (taken over), undefined when there is none. */
function lockOwner(file: string): number | undefined {
  try {
    return Number.parseInt(readFileSync(file, "utf8"), 10);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

function releaseLock(dir: string, file: string): void {
  heldDirs.delete(dir);
  if (lockOwner(file) === process.pid) rmSync(file, { force: true });
}

/**
 * The embedded store: one nedb file per collection under `dir`, owned by one process at a time
 * (`dir/store.lock`). Other processes reach it through the owner (broker or socket).
 */
export class NedbStore implements Store {
  readonly dir: string;
  private readonly lockFile: string;
  private readonly collections = new Map<string, NedbCollection<any>>();
  private readonly compaction: NodeJS.Timeout;
  private closing: Promise<void> | undefined;

  constructor(dir: string) {
    this.dir = resolve(dir);
    mkdirSync(this.dir, { recursive: true });
    this.lockFile = takeLock(this.dir);
    this.compaction = setInterval(() => void this.compact(), COMPACT_EVERY_MS).unref();
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    if (this.closing) throw closedError();
    let col = this.collections.get(name) as NedbCollection<T> | undefined;
    if (!col) {
      if (!COLLECTION_NAME.test(name)) throw new ApiError("internal_error", `storage: invalid collection name '${name}'`);
      // onload: a failed load surfaces on the collection's first operation instead of crashing the process.
      const ds = new Datastore<Stored>({ filename: join(this.dir, `${name}.db`), autoload: true, onload: () => undefined });
      col = new NedbCollection<T>(name, ds, indexes);
      this.collections.set(name, col);
    } else {
      col.declare(indexes);
    }
    return col;
  }

  private async compact(): Promise<void> {
    for (const col of this.collections.values()) {
      // The file keeps growing until the next try, which is all a failure here costs.
      await col.compact().catch((err: Error) => process.emitWarning(`storage: compacting ${col.name} failed: ${err.message}`));
    }
  }

  /** Writes every collection back compactly and releases the lock. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.compaction);
      try {
        await Promise.all([...this.collections.values()].map((c) => c.close()));
      } finally {
        releaseLock(this.dir, this.lockFile);
      }
    })();
    return this.closing;
  }
}
