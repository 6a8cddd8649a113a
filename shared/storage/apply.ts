import type { IndexSpec, Store } from "./types";

export const OPS = ["insert", "get", "findOne", "find", "count", "page", "update", "updateMany", "delete", "deleteMany"] as const;
export type Op = (typeof OPS)[number];

/** One storage operation as plain JSON: what a remote store sends to the node owning the files. */
export interface StoreMessage {
  c: string;
  op: Op;
  a: unknown[];
  /** The collection's indexes, sent with its first operation from each client. */
  i?: IndexSpec[];
}

/** Runs a message against a real store: the one protocol behind the broker and the socket. */
export async function applyMessage(store: Store, msg: StoreMessage): Promise<unknown> {
  if (!(OPS as readonly string[]).includes(msg.op)) throw new Error(`storage: unknown operation '${msg.op}'`);
  const col = store.collection(msg.c, msg.i) as unknown as Record<Op, (...args: unknown[]) => Promise<unknown>>;
  return col[msg.op](...msg.a);
}
