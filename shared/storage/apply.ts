import { ApiError } from "../errors";
import type { IndexSpec, Store } from "./types";

export const STORE_OPS = ["insert", "get", "findOne", "find", "count", "page", "update", "updateMany", "delete", "deleteMany"] as const;
export type StoreOp = (typeof STORE_OPS)[number];

/**
 * One storage operation as plain JSON: what a remote store sends to the process owning the embedded
 * files, over the broker (`store.op`) or the unix socket alike.
 */
export interface StoreMessage {
  collection: string;
  /** The collection's indexes, sent with the first operation each client makes on it. */
  indexes?: IndexSpec[];
  op: StoreOp;
  /** The arguments of the `Collection` method `op`, in order. */
  args: unknown[];
}

/** Runs a message against a real store: the one protocol behind both transports. */
export async function applyMessage(store: Store, message: StoreMessage): Promise<unknown> {
  if (!(STORE_OPS as readonly string[]).includes(message.op)) {
    throw new ApiError("internal_error", `storage: unknown operation '${String(message.op)}'`);
  }
  const collection = store.collection(message.collection, message.indexes) as unknown as Record<StoreOp, (...args: unknown[]) => Promise<unknown>>;
  // JSON has no undefined; every transport answers null for "nothing".
  return (await collection[message.op](...message.args)) ?? null;
}
