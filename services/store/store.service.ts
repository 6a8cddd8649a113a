import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { settingsOf } from "../../shared/runtime";
import { localEmbeddedStore } from "../../shared/storage";
import { STORE_OPS, applyMessage, type StoreMessage } from "../../shared/storage/apply";
import { serveSocket, socketPath, type SocketServer } from "../../shared/storage/socket";
import { COLLECTION_NAME, type Store } from "../../shared/storage/types";

interface StoreVars {
  store: Store | undefined;
  socket: SocketServer | undefined;
}

/**
 * The embedded store's owner. In a cluster without MongoDB every other node runs its storage
 * operations here, so one process applies them all and compare-and-set stays atomic; the bootstrap
 * CLI reaches the same store through `DATA_DIR/store.sock`.
 */
const StoreService: ServiceSchema<ServiceSettingSchema, Record<string, never>, StoreVars> = {
  name: "store",

  actions: {
    /** Internal, no scope: one storage operation of a remote store (shared/storage/apply.ts). */
    op: {
      visibility: "public",
      params: {
        collection: { type: "string", pattern: COLLECTION_NAME },
        indexes: { type: "array", items: "object", optional: true },
        op: { type: "enum", values: [...STORE_OPS] },
        args: { type: "array", max: 4 },
      },
      handler(ctx: Context<StoreMessage>) {
        // Started before the broker announces the action, so the store is open here.
        return applyMessage(this.store as Store, ctx.params);
      },
    },
  },

  async started() {
    const { dataDir } = settingsOf(this.broker);
    this.store = localEmbeddedStore(dataDir);
    this.socket = await serveSocket(this.store, dataDir);
    if (!this.socket) {
      this.logger.warn(`${socketPath(dataDir)} is too long for a unix socket: the CLI cannot reach this store while it runs`);
    }
  },

  async stopped() {
    await this.socket?.close();
    await this.store?.close();
    this.socket = undefined;
    this.store = undefined;
  },
};

export default StoreService;
