import { resolve } from "node:path";
import type { ServiceBroker } from "moleculer";
import type { Settings } from "../config";
import type { StoreMessage } from "./apply";
import { MongooseStore } from "./mongoose";
import { NedbStore } from "./nedb";
import { RemoteStore } from "./remote";
import { connectSocket } from "./socket";
import type { Store } from "./types";

export * from "./types";

/** How long a node waits for the cluster's store node before its first operation fails. */
const STORE_WAIT_MS = 30_000;

/**
 * One real store per DATA_DIR (or MONGO_URL) per process, shared by every broker in it (tests run
 * several), and closed when its last user closes its handle.
 */
const shared = new Map<string, { store: Store; users: number }>();

function acquire(key: string, open: () => Store): Store {
  let entry = shared.get(key);
  if (!entry) {
    entry = { store: open(), users: 0 };
    shared.set(key, entry);
  }
  entry.users += 1;
  let closed = false;
  const held = entry;
  return {
    collection: (name, indexes) => held.store.collection(name, indexes),
    async close() {
      if (closed) return;
      closed = true;
      held.users -= 1;
      if (held.users === 0) {
        shared.delete(key);
        await held.store.close();
      }
    },
  };
}

/** The embedded store owned by this process for `dataDir`. */
export function localEmbeddedStore(dataDir: string): Store {
  const dir = resolve(dataDir);
  return acquire(`nedb:${dir}`, () => new NedbStore(dir));
}

/**
 * The store a broker's services use: MongoDB when MONGO_URL is set; else the embedded files, owned
 * here when this process runs alone or runs the `store` service; else, in a cluster, the store node's
 * files reached through the broker.
 */
export function openStoreForBroker(settings: Settings, broker: ServiceBroker): Store {
  if (settings.mongoUrl) {
    const url = settings.mongoUrl;
    return acquire(`mongo:${url}`, () => new MongooseStore(url));
  }
  if (settings.transporter === undefined || settings.services.includes("store")) return localEmbeddedStore(settings.dataDir);
  let ready: Promise<void> | undefined;
  return new RemoteStore(async (msg: StoreMessage) => {
    ready ??= broker.waitForServices("store", STORE_WAIT_MS).then(() => undefined);
    await ready;
    return broker.call("store.op", msg);
  });
}

/** The CLI's store: MongoDB, or a running server's embedded store through its socket, or the files. */
export async function openStoreForCli(settings: Settings): Promise<Store> {
  if (settings.mongoUrl) return new MongooseStore(settings.mongoUrl);
  return (await connectSocket(settings.dataDir)) ?? new NedbStore(resolve(settings.dataDir));
}
