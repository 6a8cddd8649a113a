import type { ServiceSchema } from "moleculer";
import { createBroker } from "../../app/broker";
import { SERVICE_SCHEMAS } from "../../services";
import { STORAGE_POLICIES } from "../../shared/records/storage-quota";
import { declarationOf } from "../../shared/runtime/store.mixin";
import { recountService, type ServiceRecount } from "../../shared/runtime/storage-recount";
import type { Settings } from "../../shared/config";
import { openStore } from "../../shared/storage";
import { ALL_TENANTS, type Doc } from "../../shared/storage/types";

/**
 * The commands that work on the store itself (no server, no key): the same orgs and keys code as
 * the server on a local broker, on the server's DATA_DIR or MONGO_URL. The CLI's one broker.
 */
export async function createOrg(server: Settings, name: string): Promise<unknown> {
  const settings: Settings = { ...server, transporter: undefined, services: ["orgs", "keys"], logLevel: false };
  const store = openStore(settings);
  const broker = createBroker(settings, {}, store);
  await broker.start();
  try {
    return await broker.call("orgs.create", { name });
  } finally {
    await broker.stop();
    await store.close();
  }
}

/** The organizations in the store, newest first (read only; the orgs service writes them). */
export async function listOrgs(server: Settings, limit: number): Promise<{ id: string; name: string; created_at?: string }[]> {
  const store = openStore(server);
  try {
    const orgs = await store
      .collection<Doc & { name: string; created_at?: string }>("orgs")
      .find(ALL_TENANTS, {}, { sort: { id: -1 }, limit });
    return orgs.map(({ id, name, created_at }) => ({ id, name, created_at }));
  } finally {
    await store.close();
  }
}

/**
 * Recounts every service's storage counters from its counted collections (the platform stopped):
 * which service counts which collection is read from the services' store declarations.
 */
export async function recountStorage(server: Settings, dryRun: boolean): Promise<ServiceRecount[]> {
  const store = openStore(server);
  try {
    await store.opened();
    const results: ServiceRecount[] = [];
    for (const [service, schema] of Object.entries(SERVICE_SCHEMAS)) {
      const counted = (declarationOf(schema as Partial<ServiceSchema>)?.owns ?? []).filter((name) => name in STORAGE_POLICIES);
      if (counted.length > 0) results.push(await recountService(store, service, counted, { dryRun }));
    }
    return results;
  } finally {
    await store.close();
  }
}
