import type { ServiceSchema } from "moleculer";
import type { PlatformSettings } from "./platform";
import type { Store } from "./storage/types";

/** Gives a service `this.store`, the storage interface of contract section 1. */
export const StoreMixin: Partial<ServiceSchema> = {
  created() {
    (this as unknown as { store: Store }).store = (this.settings as PlatformSettings).store.acquire();
  },
  async stopped() {
    await (this.settings as PlatformSettings).store.release();
  },
};
