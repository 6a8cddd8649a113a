import mongoose from "mongoose";
import { ApiError, DuplicateKeyError } from "../errors";

const { mongo } = mongoose;

/**
 * Server error codes that say MongoDB cannot serve the operation now, though it may in a moment:
 * no primary (an election, a step-down, a replica set not initiated yet), a node shutting down, the
 * network, a time limit, a write concern not met. Each with the reason a client reads. Names and
 * numbers are the server's (the driver's MONGODB_ERROR_CODES and retryable-error lists).
 */
export const UNAVAILABLE_CODES: Readonly<Record<number, string>> = Object.freeze({
  6: "MongoDB is unreachable", // HostUnreachable
  7: "MongoDB is unreachable", // HostNotFound
  89: "MongoDB is unreachable", // NetworkTimeout
  9001: "MongoDB is unreachable", // SocketException
  91: "MongoDB is shutting down", // ShutdownInProgress
  11600: "MongoDB is shutting down", // InterruptedAtShutdown
  189: "MongoDB has no primary (an election is under way)", // PrimarySteppedDown
  10107: "MongoDB has no primary (an election is under way)", // NotWritablePrimary
  10058: "MongoDB has no primary (an election is under way)", // LegacyNotPrimary
  11602: "MongoDB has no primary (an election is under way)", // InterruptedDueToReplStateChange
  13435: "MongoDB has no primary (an election is under way)", // NotPrimaryNoSecondaryOk
  13436: "MongoDB has no primary (an election is under way)", // NotPrimaryOrSecondary
  133: "MongoDB has no primary (an election is under way)", // FailedToSatisfyReadPreference
  94: "MongoDB's replica set is not initiated yet", // NotYetInitialized
  134: "MongoDB's replica set is not ready yet", // ReadConcernMajorityNotAvailableYet
  50: "MongoDB did not answer in time", // MaxTimeMSExpired
  262: "MongoDB did not answer in time", // ExceededTimeLimit
  24: "MongoDB did not answer in time", // LockTimeout
  64: "the write was not acknowledged by a majority of MongoDB's replica set", // WriteConcernFailed
  112: "the write conflicted with another one", // WriteConflict (a transaction that kept losing)
});

/** Driver errors (by class) that say the same: no connection, a closed client, a time-out. */
const UNAVAILABLE_CLASSES: [new (...args: never[]) => Error, string][] = [
  [mongo.MongoNetworkError, "MongoDB is unreachable"],
  [mongo.MongoServerSelectionError, "no MongoDB server (or no primary) could be reached"],
  [mongo.MongoStalePrimaryError, "MongoDB has no primary (an election is under way)"],
  [mongo.MongoOperationTimeoutError, "MongoDB did not answer in time"],
  [mongo.MongoNotConnectedError, "the connection to MongoDB is closed"],
  [mongo.MongoTopologyClosedError, "the connection to MongoDB is closed"],
  [mongo.MongoClientClosedError, "the connection to MongoDB is closed"],
  [mongo.MongoServerClosedError, "the connection to MongoDB is closed"],
  [mongo.MongoExpiredSessionError, "the connection to MongoDB is closed"],
];

/**
 * Errors by name, whose classes the driver does not export (its connection pool's) or that are not
 * the driver's (mongoose's own first-connection failure).
 */
const UNAVAILABLE_NAMES: Readonly<Record<string, string>> = {
  MongooseServerSelectionError: "no MongoDB server (or no primary) could be reached",
  MongoWaitQueueTimeoutError: "MongoDB did not answer in time",
  MongoPoolClosedError: "the connection to MongoDB is closed",
};

/** Labels the server or the driver put on an error that may pass if the operation is tried again. */
const TRANSIENT_LABELS = ["TransientTransactionError", "RetryableWriteError", "SystemOverloadedError"];

/** Update refusals of MongoDB that the shared checks (scope.ts, update.ts) should have made first. */
const REFUSED_UPDATE_CODES = new Set([
  2, // BadValue
  14, // TypeMismatch ($inc of a string)
  28, // PathNotViable ($set through a scalar)
  40, // ConflictingUpdateOperators
  52, // DollarPrefixedFieldName
  57, // DottedFieldName
]);

export const DUPLICATE_KEY_CODES = new Set([11000, 11001, 12582]);

const codeOf = (err: unknown): number | undefined => {
  const e = err as { code?: unknown; result?: { writeConcernError?: { code?: unknown } } } | null;
  const code = e?.result?.writeConcernError?.code ?? e?.code;
  return typeof code === "number" ? code : undefined;
};

/** Why MongoDB cannot serve an operation for now, when that is what `err` says; else undefined. */
export function unavailableReason(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  for (const [cls, reason] of UNAVAILABLE_CLASSES) if (err instanceof cls) return reason;
  if (UNAVAILABLE_NAMES[err.name] !== undefined) return UNAVAILABLE_NAMES[err.name];
  if (err instanceof mongo.MongoWriteConcernError)
    return UNAVAILABLE_CODES[codeOf(err) ?? -1] ?? "the write was not acknowledged by MongoDB";
  if (err instanceof mongo.MongoError) {
    const code = codeOf(err);
    if (code !== undefined && UNAVAILABLE_CODES[code] !== undefined) return UNAVAILABLE_CODES[code];
    if (TRANSIENT_LABELS.some((label) => err.hasErrorLabel(label))) return "MongoDB could not complete the operation now";
  }
  return undefined;
}

/** 503 storage_unavailable with Retry-After: never counted against a node by the circuit breaker (moleculer.config.ts). */
export function storageUnavailable(reason: string): ApiError {
  return new ApiError("storage_unavailable", `The store could not complete the operation (${reason}); retry later`, {
    retry_after: 1,
    reason,
  });
}

/** The fields of the unique index a duplicate-key error names (`_id` is the document's `id`). */
export function duplicateFields(err: unknown): string[] {
  const pattern = (err as { keyPattern?: Record<string, unknown> } | null)?.keyPattern;
  if (pattern) return Object.keys(pattern).map((f) => (f === "_id" ? "id" : f));
  const index = /index: (\S+)/.exec((err as Error | null)?.message ?? "")?.[1];
  return index === "_id_" ? ["id"] : [];
}

/**
 * What an operation on `collection` answers for an error MongoDB or the driver raised: a unique
 * index's refusal as DuplicateKeyError, unavailability as 503, an update MongoDB refuses as a
 * storage error naming it; anything else (an ApiError already made, a defect) as it is.
 */
export function mongoFailure(collection: string, err: unknown): never {
  if (err instanceof ApiError) throw err;
  const code = codeOf(err);
  if (err instanceof mongo.MongoServerError && code !== undefined && DUPLICATE_KEY_CODES.has(code))
    throw new DuplicateKeyError(collection, duplicateFields(err));
  const reason = unavailableReason(err);
  if (reason !== undefined) throw storageUnavailable(reason);
  if (err instanceof mongo.MongoServerError && code !== undefined && REFUSED_UPDATE_CODES.has(code))
    throw new ApiError("internal_error", `storage: MongoDB refused an operation on '${collection}': ${err.message}`);
  throw err;
}
