import { createRequire } from "node:module";
import fc from "fast-check";
import mongoose from "mongoose";
import { countsAgainstNode } from "../../../../moleculer.config";
import { DUPLICATE_KEY_CODES, mongoFailure, UNAVAILABLE_CODES, unavailableReason } from "../../../../shared/storage/mongo-errors";

const { mongo } = mongoose;

/** A server error as the driver makes it from a server's reply. */
const serverError = (code: number, extra: Record<string, unknown> = {}) =>
  new mongo.MongoServerError({ ok: 0, code, errmsg: `server error ${code}`, ...extra });

/** What an operation answers for `err`: the error it throws. */
function answer(err: unknown): any {
  try {
    mongoFailure("things", err);
  } catch (thrown) {
    return thrown;
  }
  throw new Error("mongoFailure returned");
}

function expectUnavailable(err: unknown): void {
  const got = answer(err);
  expect({ type: got.type, code: got.code, retryAfter: got.data?.retry_after }).toEqual({
    type: "storage_unavailable",
    code: 503,
    retryAfter: 1,
  });
  // Never counted against the node by the circuit breaker: the store failed, not the node.
  expect(countsAgainstNode(got)).toBe(false);
}

describe("a failure of MongoDB, as an operation answers it", () => {
  it("answers 503 storage_unavailable with Retry-After for the driver's connection, closing and time-out errors", () => {
    const topology = { type: "Unknown", servers: new Map(), error: null } as never;
    expectUnavailable(new mongo.MongoNetworkError("connection reset"));
    expectUnavailable(new mongo.MongoNetworkTimeoutError("timed out"));
    expectUnavailable(new mongo.MongoServerSelectionError("Server selection timed out after 5000 ms", topology));
    expectUnavailable(new mongo.MongoNotConnectedError("Client must be connected before running operations"));
    expectUnavailable(new mongo.MongoTopologyClosedError());
    expectUnavailable(new mongo.MongoClientClosedError());
    expectUnavailable(new mongo.MongoServerClosedError());
    expectUnavailable(new mongo.MongoOperationTimeoutError("Timed out during operation"));
    expectUnavailable(new mongo.MongoExpiredSessionError());
  });

  it("answers 503 when the connection pool is closed or no connection of it frees in time", () => {
    // The pool's errors, which the driver does not export, from the driver mongoose loads.
    const pool = createRequire(require.resolve("mongoose"))("mongodb/lib/cmap/errors") as Record<string, new (...args: unknown[]) => Error>;
    expectUnavailable(new pool.WaitQueueTimeoutError("Timed out while checking out a connection from connection pool", "127.0.0.1:27017"));
    expectUnavailable(new pool.PoolClosedError({ address: "127.0.0.1:27017" }));
  });

  it("answers 503 for mongoose's failed first connection", () => {
    const { MongooseServerSelectionError } = mongoose.Error as unknown as Record<string, new (message: string) => Error>;
    const err = new MongooseServerSelectionError("connect ECONNREFUSED 127.0.0.1:27017");
    expect(err.name).toBe("MongooseServerSelectionError");
    expectUnavailable(err);
  });

  it("answers 503 for elections, shutdowns and the other server codes that pass, each with its reason", () => {
    const named: Record<string, number> = {
      NotWritablePrimary: 10107,
      PrimarySteppedDown: 189,
      ShutdownInProgress: 91,
      InterruptedAtShutdown: 11600,
      InterruptedDueToReplStateChange: 11602,
      NotPrimaryNoSecondaryOk: 13435,
      NotPrimaryOrSecondary: 13436,
      NotYetInitialized: 94,
      HostUnreachable: 6,
      NetworkTimeout: 89,
      MaxTimeMSExpired: 50,
      ExceededTimeLimit: 262,
    };
    for (const code of Object.values(named)) expectUnavailable(serverError(code));
    for (const code of Object.keys(UNAVAILABLE_CODES).map(Number)) expectUnavailable(serverError(code));
    expect(answer(serverError(91)).data.reason).toBe("MongoDB is shutting down");
    expect(answer(serverError(10107)).data.reason).toMatch(/no primary/);
  });

  it("answers 503 for a write concern not met, and for errors labelled transient", () => {
    expectUnavailable(
      new mongo.MongoWriteConcernError({ writeConcernError: { code: 64, errmsg: "waiting for replication timed out" } } as never),
    );
    const transient = serverError(251);
    transient.addErrorLabel("TransientTransactionError");
    expectUnavailable(transient);
  });

  it("answers a unique index's refusal as resource_exists naming its fields, `_id` as `id`", () => {
    const dup = answer(serverError(11000, { keyPattern: { org_id: 1, email: 1 }, keyValue: { org_id: "o", email: "a@x.io" } }));
    expect({ type: dup.type, code: dup.code, fields: dup.data.fields, collection: dup.data.collection }).toEqual({
      type: "resource_exists",
      code: 409,
      fields: ["org_id", "email"],
      collection: "things",
    });
    expect(answer(serverError(11000, { keyPattern: { _id: 1 } })).data.fields).toEqual(["id"]);
    expect(answer(serverError(11000)).type).toBe("resource_exists");
  });

  it("answers an update MongoDB refuses as a storage error that names it (500, a defect of the caller)", () => {
    const refused = answer(serverError(28, { errmsg: "Cannot create field 'b' in element {a: 5}" }));
    expect({ type: refused.type, code: refused.code }).toEqual({ type: "internal_error", code: 500 });
    expect(refused.message).toMatch(/things.*Cannot create field/);
  });

  it("passes any other error through as it is, and never calls it unavailable", () => {
    const known = new Set([...Object.keys(UNAVAILABLE_CODES).map(Number), ...DUPLICATE_KEY_CODES, 2, 14, 28, 40, 52, 57]);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }).filter((c) => !known.has(c)),
        (code) => {
          const err = serverError(code);
          expect(unavailableReason(err)).toBeUndefined();
          expect(answer(err)).toBe(err);
        },
      ),
    );
    const plain = new TypeError("x is not a function");
    expect(answer(plain)).toBe(plain);
  });
});
