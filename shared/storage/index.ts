import { resolve } from "node:path";
import type { ServiceBroker } from "moleculer";
import type { Settings } from "../config";
import { MongooseStore } from "./mongoose";
import { NedbStore } from "./nedb";
import { RemoteStore, sendOverBroker } from "./remote";
import { connectSocket } from "./socket";
import type { Store } from "./types";

export * from "./types";

/** How long a node waits for the cluster's store node before an operation answers 503. */
const STORE_WAIT_MS = 30_000;

/**
 * The real stores this process holds, one per DATA_DIR or MONGO_URL, shared by every broker in the
 * process (tests run several) and closed when the last handle to one is closed.
 */
const shared = new Map<string, { store: Store; users: number }>();

function acquire(key: string, open: () => Store): Store {
  let entry = shared.get(key);
  if (!entry) {
    entry = { store: open(), users: 0 };
    shared.set(key, entry);
  }
  entry.users += 1;
  const held = entry;
  let released = false;
  return {
    collection: (name, indexes) => held.store.collection(name, indexes),
    async close() {
      if (released) return;
      released = true;
      held.users -= 1;
      if (held.users > 0) return;
      shared.delete(key);
      await held.store.close();
    },
  };
}

/** A handle on the embedded store this process owns for `dataDir` (opened, and locked, on first use). */
export function localEmbeddedStore(dataDir: string): Store {
  const dir = resolve(dataDir);
  return acquire(`nedb:${dir}`, () => new NedbStore(dir));
}

/**
 * The store a broker's services use: MongoDB when MONGO_URL is set; else the embedded files, owned
 * here when the process runs alone or runs the `store` service; else the store node's files,
 * reached through the broker.
 */
export function openStoreForBroker(settings: Settings, broker: ServiceBroker): Store {
  const url = settings.mongoUrl;
  if (url) return acquire(`mongo:${url}`, () => new MongooseStore(url));
  if (settings.transporter === undefined || settings.services.includes("store")) return localEmbeddedStore(settings.dataDir);
  return new RemoteStore(sendOverBroker(broker, STORE_WAIT_MS));
}

/**
 * The bootstrap CLI's store: MongoDB; else a running server's embedded store through its socket;
 * else the files themselves (taking the lock, so a server cannot start on them meanwhile).
 */
export async function openStoreForCli(settings: Settings): Promise<Store> {
  if (settings.mongoUrl) return new MongooseStore(settings.mongoUrl);
  return (await connectSocket(settings.dataDir)) ?? new NedbStore(settings.dataDir);
}
