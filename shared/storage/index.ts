import { resolve } from "node:path";
import type { Settings } from "../config";
import { MongooseStore } from "./mongoose";
import { SqliteStore } from "./sqlite";
import type { Store } from "./types";

export * from "./types";

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
    atomically: (writes) => held.store.atomically(writes),
    probe: () => held.store.probe(),
    opened: () => held.store.opened(),
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

/**
 * The store of a process's services, and of the CLI: MongoDB when MONGO_URL is set; else the
 * embedded SQLite file under DATA_DIR, which every process on the machine opens directly (a cluster
 * without MongoDB needs no store node, and the CLI works while the server runs).
 */
export function openStore(settings: Pick<Settings, "mongoUrl" | "dataDir">): Store {
  const url = settings.mongoUrl;
  if (url) return acquire(`mongo:${url}`, () => new MongooseStore(url));
  const dir = resolve(settings.dataDir);
  return acquire(`sqlite:${dir}`, () => new SqliteStore(dir));
}
