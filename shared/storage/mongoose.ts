import mongoose, { type ConnectOptions, type Connection } from "mongoose";
import { ApiError } from "../errors";
import { clientOptions, OPERATION_TIMEOUT_MS, topologyProblem } from "./mongo-client";
import { MongoCollection, retried, type CollectionHost, type Db, type Session } from "./mongo-collection";
import { storedUpdate } from "./mongo-docs";
import { mongoFailure, unavailableReason } from "./mongo-errors";
import { checkUpdate } from "./scope";
import { COLLECTION_NAME, type AtomicWrite, type Collection, type Doc, type IndexSpec, type Store } from "./types";

const hasLabel = (err: unknown, label: string): boolean => err instanceof mongoose.mongo.MongoError && err.hasErrorLabel(label);

/** MongoDB stops working on an operation past this (503). */
const TIME_LIMIT = { maxTimeMS: OPERATION_TIMEOUT_MS } as const;

const closed = () => new ApiError("service_unavailable", "The store is closed", { retry_after: 1 });

export interface MongooseStoreOptions {
  /** Where connection losses, index problems and the like are reported (default: process warnings). */
  warn?: (message: string) => void;
  /** Client options over clientOptions() (tests: a short server selection time-out). */
  client?: Partial<ConnectOptions>;
}

/**
 * MongoDB through mongoose's connection and the driver it holds (no models: the documents are
 * schemaless JSON, and one API means one set of semantics for a filter). Needs a replica set, for
 * transactions (checked at connect; docker-compose runs a single-node one).
 */
export class MongooseStore implements Store, CollectionHost {
  private readonly conn: Connection;
  private readonly collections = new Map<string, MongoCollection<any>>();
  /** mongoose does not retry a failed first connection by itself: the next operation does. */
  private readonly connect: () => Promise<Db>;
  private readonly firstConnect: Promise<unknown>;
  /** Why this store cannot be used as configured (no replica set, documents of an earlier version). */
  private fatal: ApiError | undefined;
  private closing: Promise<void> | undefined;
  private readonly inflight = new Set<Promise<unknown>>();
  readonly warn: (message: string) => void;

  constructor(url: string, options: MongooseStoreOptions = {}) {
    this.warn = options.warn ?? ((message) => process.emitWarning(message, "StorageWarning"));
    this.conn = mongoose.createConnection();
    this.conn.on("error", (err: Error) => this.warn(`storage: MongoDB connection error: ${err.message}`));
    let connectedOnce = false;
    this.conn.on("connected", () => (connectedOnce = true));
    this.conn.on("disconnected", () => {
      if (connectedOnce && !this.closing) this.warn("storage: lost the connection to MongoDB; operations answer 503 until it is back");
    });
    this.conn.on("reconnected", () => this.warn("storage: connected to MongoDB again"));
    this.connect = retried(async () => {
      await this.conn.openUri(url, clientOptions(options.client));
      const db = this.conn.db!;
      const problem = topologyProblem(await db.admin().command({ hello: 1 }));
      if (problem) this.refuse(problem);
      return db;
    });
    // Connects at once, so a misconfiguration is known at start (see opened()).
    this.firstConnect = this.connect().catch(() => undefined);
  }

  /** From now on every operation, and opened(), fail with `message`; it is also reported. */
  refuse(message: string): never {
    if (!this.fatal) {
      this.fatal = new ApiError("internal_error", message);
      this.warn(message);
    }
    throw this.fatal;
  }

  /** The database, connected, or a failure (503 while unreachable). */
  async db(): Promise<Db> {
    if (this.fatal) throw this.fatal;
    const db = await this.connect();
    if (this.fatal) throw this.fatal;
    return db;
  }

  /** Runs one operation of `collection`, counted until it ends (close() waits for it), failures mapped. */
  run<R>(collection: string, op: (db: Db) => Promise<R>): Promise<R> {
    if (this.closing) return Promise.reject(closed());
    const running = (async () => {
      try {
        return await op(await this.db());
      } catch (err) {
        return mongoFailure(collection, err);
      }
    })();
    this.inflight.add(running);
    const done = () => this.inflight.delete(running);
    running.then(done, done);
    return running;
  }

  /**
   * `work` in one transaction, tried again while MongoDB calls the failure transient (a write
   * conflict, an election), for OPERATION_TIMEOUT_MS at most: the driver's withTransaction would
   * keep trying for 120 s. `work` may abort the transaction itself (then nothing is committed).
   */
  async transaction<R>(work: (session: Session) => Promise<R>): Promise<R> {
    const session = this.conn.getClient().startSession();
    const deadline = Date.now() + OPERATION_TIMEOUT_MS;
    try {
      for (;;) {
        session.startTransaction({
          writeConcern: { w: "majority", wtimeoutMS: OPERATION_TIMEOUT_MS },
          maxCommitTimeMS: OPERATION_TIMEOUT_MS,
        });
        try {
          const out = await work(session);
          if (session.inTransaction()) await this.commit(session, deadline);
          return out;
        } catch (err) {
          if (session.inTransaction()) await session.abortTransaction().catch(() => undefined);
          if (!hasLabel(err, "TransientTransactionError") || Date.now() >= deadline) throw err;
        }
      }
    } finally {
      await session.endSession();
    }
  }

  /** Commits, asking again while the outcome is unknown (a commit is idempotent), until `deadline`. */
  private async commit(session: Session, deadline: number): Promise<void> {
    for (;;) {
      try {
        return await session.commitTransaction();
      } catch (err) {
        if (!hasLabel(err, "UnknownTransactionCommitResult") || Date.now() >= deadline) throw err;
      }
    }
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    if (this.closing) throw closed();
    let col = this.collections.get(name) as MongoCollection<T> | undefined;
    if (!col) {
      if (!COLLECTION_NAME.test(name)) throw new ApiError("internal_error", `storage: invalid collection name '${name}'`);
      col = new MongoCollection<T>(name, this, indexes);
      this.collections.set(name, col);
    } else {
      col.declare(indexes);
    }
    return col;
  }

  /**
   * Resolves once connected, the server a replica set member and the collections declared so far
   * looked at (index builds go on in the background), or once MongoDB proved unreachable for now
   * (operations answer 503 and connect again); rejects when the store cannot be used as configured.
   */
  async opened(): Promise<void> {
    try {
      await this.db();
      await Promise.all([...this.collections.values()].map((c) => c.inspected()));
    } catch (err) {
      if (this.fatal) throw this.fatal;
      if (unavailableReason(err) === undefined) throw err;
    }
  }

  /**
   * In one multi-document transaction. A lost compare-and-set aborts it and answers null; a refusal
   * names the collection of the write that was refused.
   */
  async atomically(writes: AtomicWrite[]): Promise<Doc[] | null> {
    // By name: a caller may hold a wrapper of the collection (an instrumented store in tests).
    const collections = writes.map((w) => {
      const col = this.collections.get(w.collection.name) as MongoCollection<Doc> | undefined;
      if (!col) throw new ApiError("internal_error", `storage: '${w.collection.name}' is not a collection of this store`);
      return col;
    });
    const updates = writes.map((w) => (w.op === "update" ? storedUpdate(checkUpdate(w.update)) : undefined));
    let at = 0;
    return this.run(collections[0]?.name ?? "", async (db) => {
      await Promise.all([...new Set(collections)].map((c) => c.prepare()));
      try {
        return await this.transaction(async (session) => {
          const done: Doc[] = [];
          for (at = 0; at < writes.length; at += 1) {
            const doc = await collections[at].writeIn(db, session, writes[at], updates[at]);
            if (!doc) {
              await session.abortTransaction();
              return null;
            }
            done.push(doc);
          }
          return done;
        });
      } catch (err) {
        return mongoFailure(collections[Math.min(at, collections.length - 1)].name, err);
      }
    });
  }

  /** A small real write: one document of `_probe` upserted (acknowledged like every write); fails as a write would. */
  probe(): Promise<void> {
    return this.run("_probe", async (db) => {
      await db
        .collection<{ _id: string; at: Date }>("_probe")
        .updateOne({ _id: "probe" }, { $set: { at: new Date() } }, { upsert: true, ...TIME_LIMIT });
    });
  }

  /** Answers every operation under way (each ends within the operation time-out), then closes the connection. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([this.firstConnect, ...this.inflight]);
      await this.conn.close();
    })();
    return this.closing;
  }
}
