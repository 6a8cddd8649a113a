import type { ServiceSettingSchema } from "moleculer";
import type { Settings } from "../config";
import type { Store } from "../storage/types";
import type { Clock } from "./clock";

/** The store a node's services share: opened when the first of them takes it, closed when the last gives it back. */
export interface SharedStore {
  acquire(): Store;
  release(): Promise<void>;
}

export function sharedStore(open: () => Store): SharedStore {
  let handle: { store: Store; users: number } | undefined;
  return {
    acquire() {
      handle ??= { store: open(), users: 0 };
      handle.users += 1;
      return handle.store;
    },
    async release() {
      if (!handle) return;
      handle.users -= 1;
      if (handle.users > 0) return;
      const { store } = handle;
      handle = undefined;
      await store.close();
    },
  };
}

/**
 * What every service finds in its schema settings, put there by the composition root
 * (app/broker.ts). They are secure settings: other nodes never see them (they hold the NATS
 * credentials), and a service is configured by the broker that runs it, not by a lookup.
 */
export interface PlatformSettings extends ServiceSettingSchema {
  /** The node's settings, read from the environment once (shared/config.ts). */
  config: Settings;
  store: SharedStore;
  /** The API reference the gateway serves at /v1/openapi.json, made on first use. */
  apiReference(): unknown;
  /** What per-minute budgets read the time from (a test's own clock in tests). */
  clock: Clock;
}
