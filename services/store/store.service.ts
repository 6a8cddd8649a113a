import type { Server } from "node:net";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { settingsOf } from "../../shared/runtime";
import { OPS, applyMessage, type StoreMessage } from "../../shared/storage/apply";
import { localEmbeddedStore } from "../../shared/storage";
import { serveSocket } from "../../shared/storage/socket";
import type { Store } from "../../shared/storage/types";

interface StoreVars {
  store: Store;
  socket: Server | undefined;
}

/**
 * The embedded store's owner. In a cluster without MongoDB every other node runs its storage
 * operations here, so one process applies them all and compare-and-set stays atomic; the bootstrap
 * CLI reaches it through `DATA_DIR/store.sock`.
 */
const StoreService: ServiceSchema<ServiceSettingSchema, Record<string, never>, StoreVars> = {
  name: "store",

  actions: {
    /** Internal: one storage operation (see shared/storage/apply.ts). */
    op: {
      visibility: "public",
      params: {
        c: { type: "string", pattern: /^[a-z][a-z0-9_]*$/ },
        op: { type: "enum", values: [...OPS] },
        a: { type: "array" },
        i: { type: "array", optional: true },
      },
      handler(ctx: Context<StoreMessage>) {
        return applyMessage(this.store, ctx.params);
      },
    },
  },

  async started() {
    const settings = settingsOf(this.broker);
    this.store = localEmbeddedStore(settings.dataDir);
    this.socket = await serveSocket(this.store, settings.dataDir);
    if (!this.socket) this.logger.warn("DATA_DIR's path is too long for a unix socket: the CLI cannot reach this running store");
  },

  async stopped() {
    await new Promise<void>((done) => (this.socket ? this.socket.close(() => done()) : done()));
    await this.store?.close();
  },
};

export default StoreService;
