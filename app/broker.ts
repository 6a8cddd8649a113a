import { ServiceBroker, type BrokerOptions, type ServiceSchema } from "moleculer";
import { brokerOptions } from "../moleculer.config";
import { SERVICE_SCHEMAS } from "../services";
import { ROUTES } from "../services/gateway/routes";
import type { Settings } from "../shared/config";
import { systemClock, type Clock } from "../shared/runtime/clock";
import { sharedStore, type PlatformSettings } from "../shared/runtime/platform";
import { openStore } from "../shared/storage";
import type { Store } from "../shared/storage/types";
import { openApiDocument } from "./openapi";

/**
 * The composition root: a broker running the services `settings.services` names, each configured
 * through its schema settings (shared/runtime/platform.ts). Without a transporter every service runs here.
 * A `store` given here is used instead of opening one.
 */
export function createBroker(settings: Settings, overrides: Partial<BrokerOptions> = {}, store?: Store, clock?: Clock): ServiceBroker {
  const broker = new ServiceBroker(brokerOptions(settings, overrides));
  const platform = platformOf(settings, store, clock);
  for (const name of settings.services) {
    const schema = SERVICE_SCHEMAS[name];
    if (schema) broker.createService(configured(schema, platform));
  }
  return broker;
}

/** What the services of one broker share: the settings, one store handle, the API reference. */
export function platformOf(
  settings: Settings,
  store?: Store,
  clock: Clock = systemClock,
): Pick<PlatformSettings, "config" | "store" | "apiReference" | "clock"> {
  let reference: unknown;
  return {
    config: settings,
    clock,
    store: sharedStore(() => store ?? openStore(settings)),
    apiReference: () => (reference ??= openApiDocument(ROUTES, SERVICE_SCHEMAS)),
  };
}

/**
 * `schema` with the platform in its settings, kept out of what the service tells other nodes about
 * itself (tests also run one service this way, with its neighbours stubbed).
 */
export function configured(schema: ServiceSchema<any, any, any>, platform: Record<string, unknown>): ServiceSchema<any, any, any> {
  const own = schema.settings ?? {};
  const secure = [...(own.$secureSettings ?? []), ...Object.keys(platform)];
  return { ...schema, settings: { ...own, ...platform, $secureSettings: secure } };
}
