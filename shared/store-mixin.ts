import type { ServiceBroker, ServiceSchema } from "moleculer";
import { ListenerAnnouncementsMixin } from "./listeners";
import { boundStoreOf, settingsOf } from "./runtime";
import { openStore } from "./storage";
import type { Store } from "./storage/types";

/** One store handle per broker, shared by its services and closed when the last of them stops. */
const handles = new WeakMap<ServiceBroker, { store: Store; users: number }>();

function acquire(broker: ServiceBroker): Store {
  let handle = handles.get(broker);
  if (!handle) {
    handle = { store: boundStoreOf(broker) ?? openStore(settingsOf(broker)), users: 0 };
    handles.set(broker, handle);
  }
  handle.users += 1;
  return handle.store;
}

async function release(broker: ServiceBroker): Promise<void> {
  const handle = handles.get(broker);
  if (!handle) return;
  handle.users -= 1;
  if (handle.users === 0) {
    handles.delete(broker);
    await handle.store.close();
  }
}

/** Gives a service `this.store`, the storage interface of contract section 1. */
export const StoreMixin: Partial<ServiceSchema> = {
  // Whoever has the store may store events: it keeps track of which tenants a listener streams.
  mixins: [ListenerAnnouncementsMixin],
  created() {
    (this as unknown as { store: Store }).store = acquire(this.broker);
  },
  async stopped() {
    await release(this.broker);
  },
};
