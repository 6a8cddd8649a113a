import type { ConnectOptions } from "mongoose";

/**
 * How long MongoDB may work on one operation (`maxTimeMS`), wait for a majority to acknowledge a
 * write (`wtimeoutMS`), and how long a transaction keeps retrying; past it the operation answers 503.
 */
export const OPERATION_TIMEOUT_MS = 10_000;
/** How long an operation waits for a reachable primary (a restart, an election) before it answers 503. */
export const SERVER_SELECTION_TIMEOUT_MS = 5_000;
/**
 * How long a connection may stay silent before the driver gives up on it: a primary that stalls
 * without closing its sockets. Above OPERATION_TIMEOUT_MS, so the server's own time limit speaks first.
 */
export const SOCKET_TIMEOUT_MS = 2 * OPERATION_TIMEOUT_MS;

/**
 * The connection's options, set deliberately rather than left to the driver's defaults:
 * - `ignoreUndefined`: a field set to undefined is left out, as JSON (and so the embedded store)
 *   leaves it out. The driver's default stores null, which `$exists: false` no longer matches, a
 *   sparse unique index counts, and `$inc` cannot add to.
 * - time-outs: the driver's defaults wait forever for a silent socket and for a pooled connection,
 *   so a stalled primary would hold requests and background loops; here each wait is bounded, and
 *   answered 503 (with `maxTimeMS` on each operation: see MongooseStore). Its `timeoutMS` is not
 *   used: driver 7 ignores it.
 * - writes acknowledged by a majority (what survives an election), retried once by the driver
 *   across a failover; reads retried likewise.
 * - mongoose's buffering, automatic indexes and collection creation off: nothing waits silently
 *   for a connection, and indexes are created by the store, under names it chooses (mongo-indexes.ts).
 */
export function clientOptions(overrides: Partial<ConnectOptions> = {}): ConnectOptions {
  return {
    ignoreUndefined: true,
    serverSelectionTimeoutMS: SERVER_SELECTION_TIMEOUT_MS,
    connectTimeoutMS: SERVER_SELECTION_TIMEOUT_MS,
    socketTimeoutMS: SOCKET_TIMEOUT_MS,
    waitQueueTimeoutMS: OPERATION_TIMEOUT_MS,
    writeConcern: { w: "majority", wtimeoutMS: OPERATION_TIMEOUT_MS },
    retryWrites: true,
    retryReads: true,
    bufferCommands: false,
    autoIndex: false,
    autoCreate: false,
    ...overrides,
  };
}

/**
 * Why the server a `hello` answer describes cannot hold this platform's data, or undefined. Every
 * change is written in a transaction with its audit record and its events (Store.atomically), and
 * MongoDB runs transactions only on a replica set member or through mongos: on a standalone server
 * every change would be refused after its first write.
 */
export function topologyProblem(hello: Record<string, unknown>): string | undefined {
  if (typeof hello.setName === "string" || hello.msg === "isdbgrid") return undefined;
  return (
    "MongoDB at MONGO_URL is a standalone server, and this platform writes in transactions, which need a replica set. " +
    "Start mongod with --replSet rs0, run rs.initiate() once in mongosh, and add ?replicaSet=rs0 to MONGO_URL " +
    "(docker-compose.yml does all three; a single-node replica set is enough)."
  );
}
