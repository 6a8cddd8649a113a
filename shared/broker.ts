import { ServiceBroker, type BrokerOptions } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { SERVICE_SCHEMAS } from "../services";
import { ROUTES } from "../services/gateway/routes";
import { openApiDocument } from "./openapi";
import type { Settings } from "./config";
import { bindApiReference, bindSettings, bindStore } from "./runtime";
import type { Store } from "./storage/types";

/**
 * A broker running the services `settings.services` names. Without a transporter every service
 * runs here. A `store` given here is used instead of opening one.
 */
export function createBroker(settings: Settings, overrides: Partial<BrokerOptions> = {}, store?: Store): ServiceBroker {
  const broker = new ServiceBroker(brokerOptions(settings, overrides));
  bindSettings(broker, settings);
  bindApiReference(broker, () => openApiDocument(ROUTES, SERVICE_SCHEMAS));
  if (store) bindStore(broker, store);
  for (const name of settings.services) {
    const schema = SERVICE_SCHEMAS[name];
    if (schema) broker.createService(schema);
  }
  return broker;
}
