import type { ServiceBroker } from "moleculer";
import type { Settings } from "./config";
import type { Store } from "./storage/types";

/**
 * Per-broker runtime state. Tests run several brokers in one process, each with its own settings
 * (ports, DATA_DIR), so nothing here is a process-wide singleton.
 */
const settingsByBroker = new WeakMap<ServiceBroker, Settings>();

export function bindSettings(broker: ServiceBroker, settings: Settings): void {
  settingsByBroker.set(broker, settings);
}

export function settingsOf(broker: ServiceBroker): Settings {
  const settings = settingsByBroker.get(broker);
  if (!settings) throw new Error(`broker ${broker.nodeID} was not created through createBroker()`);
  return settings;
}

const storeByBroker = new WeakMap<ServiceBroker, Store>();

/** Gives a broker's services a store opened elsewhere (the CLI reaches a running server's store). */
export function bindStore(broker: ServiceBroker, store: Store): void {
  storeByBroker.set(broker, store);
}

export const boundStoreOf = (broker: ServiceBroker): Store | undefined => storeByBroker.get(broker);

const referenceByBroker = new WeakMap<ServiceBroker, () => unknown>();

/** The API reference a broker's gateway serves, made on first use. */
export function bindApiReference(broker: ServiceBroker, make: () => unknown): void {
  let made: unknown;
  referenceByBroker.set(broker, () => (made ??= make()));
}

export const apiReferenceOf = (broker: ServiceBroker): unknown => referenceByBroker.get(broker)?.() ?? null;
