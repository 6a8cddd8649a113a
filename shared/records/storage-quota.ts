import { ApiError } from "../errors";
import type { Environment, Tenant, Update } from "../storage/types";
import { collectionSpec } from "../storage/types";
import { MARKERS } from "./events";

/**
 * The storage quota (STORAGE_QUOTA_BYTES, per organization and environment; docs/security/storage-quota.md):
 * the bytes of a tenant's documents are kept in counter rows (one per tenant and service), each
 * changed in the same transaction as the document written, never counted by scanning.
 *
 * Which collections count, and how:
 * - `checked`: an insert that would take the tenant past its quota is refused (`quota_exceeded`);
 *   these are what the tenant's API calls create (events, webhooks, keys, workflows and their
 *   versions, secrets, members).
 * - not `checked`: counted, never refused: records the platform keeps of what was accepted
 *   (deliveries and runs of accepted events, audit entries, idempotency records, event types), so
 *   a tenant at its quota can still delete, and nothing already accepted stops halfway.
 * - `volatile`: fields of the platform's own bookkeeping (claims, markers, last use), left out of
 *   the size, so the frequent updates that touch only them are not measured at all.
 * Other collections (usage and outcome counters, throttles, budgets, outboxes) are the platform's
 * own, bounded by their retention, and not counted.
 */
export interface StoragePolicy {
  /** Whether an insert is checked: for all of the collection's documents, or for those `checked` answers true for. */
  checked: boolean | ((doc: Record<string, unknown>) => boolean);
  volatile: readonly string[];
  /**
   * A revision field every write of other than volatile fields changes, and that such writes
   * compare-and-set on: a document this process last wrote at that revision is then known without
   * reading it again (a run's engine writes).
   */
  version?: string;
}

export const STORAGE_POLICIES: Readonly<Record<string, StoragePolicy>> = {
  // Events clients send are checked; those services hand over (a run's system events, its `emit`
  // steps) record what was accepted already and are only counted.
  events: { checked: (doc) => doc.source === "api", volatile: MARKERS },
  webhooks: { checked: true, volatile: ["consecutive_failures"] },
  api_keys: { checked: true, volatile: ["last_used_at"] },
  workflows: { checked: true, volatile: [] },
  workflow_versions: { checked: true, volatile: [] },
  workflow_secrets: { checked: true, volatile: [] },
  members: { checked: true, volatile: [] },
  workflow_runs: { checked: false, volatile: ["due_at", "lease", "stalls"], version: "rev" },
  webhook_deliveries: { checked: false, volatile: ["due_at", "lease"] },
  audit_log: { checked: false, volatile: [] },
  idempotency_keys: { checked: false, volatile: [] },
  event_types: { checked: false, volatile: [] },
};

/** Whether inserting `doc` is checked against the quota (see StoragePolicy). */
export const insertChecked = (policy: StoragePolicy, doc: Record<string, unknown>): boolean =>
  typeof policy.checked === "function" ? policy.checked(doc) : policy.checked;

/** A counter row: `bytes` of one tenant's counted documents written by one service. */
export interface StorageUsageDoc {
  id: string;
  org_id: string;
  environment: Environment;
  bytes: number;
}

/**
 * The services that own counted collections. Each keeps its tenants' counters in a collection of
 * its own (one writer per collection, as for every collection), and a tenant's usage is the sum of
 * its row in each: at most this many rows, read by id.
 */
export const STORAGE_COUNTING_SERVICES = ["events", "gateway", "keys", "orgs", "webhook-dispatcher", "webhooks", "workflows"] as const;

/** The counters of the service `service`. */
export const storageUsageSpec = (service: string) => collectionSpec<StorageUsageDoc>(`storage_usage_${service.replace(/-/g, "_")}`);

/**
 * Whose bytes a document are: its organization and environment; an organization-wide document
 * (a member, an audit entry of an organization-wide action) counts against the live environment.
 * Null for a document of no organization.
 */
export function tenantOf(doc: Record<string, unknown>): Required<Tenant> | null {
  if (typeof doc.org_id !== "string") return null;
  return { org_id: doc.org_id, environment: doc.environment === "test" ? "test" : "live" };
}

export const usageId = (t: Required<Tenant>): string => `${t.org_id}:${t.environment}`;

export const usageDoc = (t: Required<Tenant>): StorageUsageDoc => ({ id: usageId(t), ...t, bytes: 0 });

/**
 * A document's size as counted: the length of its JSON text without its volatile fields (the same
 * whatever the order of its keys, so a document read back measures as it did when written).
 */
export function storedSize(doc: Record<string, unknown>, volatile: readonly string[]): number {
  return JSON.stringify(doc).length - volatileSize(doc, volatile);
}

/** Each top-level field's part of a document's JSON text (`"field":value,`), its volatile fields left out. */
export type FieldSizes = Record<string, number>;

const entrySize = (field: string, value: unknown): number => field.length + 4 + JSON.stringify(value).length;

/**
 * A document's size as `storedSize` counts it, and each field's part of it: the JSON text of an
 * object is one brace plus, per field, its key, value, quotes, colon and a comma or closing brace.
 */
export function measureFields(doc: Record<string, unknown>, volatile: readonly string[]): { size: number; fields: FieldSizes } {
  const fields: FieldSizes = {};
  let size = 1;
  for (const [field, value] of Object.entries(doc)) {
    if (value === undefined || volatile.includes(field)) continue;
    size += fields[field] = entrySize(field, value);
  }
  return { size, fields };
}

/**
 * What `update` changes of the size of a document whose fields measure `fields`, and their
 * measures after it, from the values it writes alone; null when it writes anything but whole
 * top-level fields (`$set` and `$unset` of undotted paths), which needs the document.
 */
export function sizeChangeOf(
  fields: FieldSizes,
  update: Update,
  volatile: readonly string[],
): { delta: number; fields: FieldSizes } | null {
  if (update.$inc || update.$push) return null;
  const after = { ...fields };
  let delta = 0;
  const drop = (field: string) => {
    delta -= after[field] ?? 0;
    delete after[field];
  };
  for (const [field, value] of Object.entries(update.$set ?? {})) {
    if (field.includes(".")) return null;
    if (volatile.includes(field)) continue;
    if (value === undefined) {
      drop(field);
      continue;
    }
    const size = entrySize(field, value);
    delta += size - (after[field] ?? 0);
    after[field] = size;
  }
  for (const field of Object.keys(update.$unset ?? {})) {
    if (field.includes(".")) return null;
    if (!volatile.includes(field)) drop(field);
  }
  return { delta, fields: after };
}

/** The part of a document's JSON text its volatile fields take: `"field":value,` for each present. */
export function volatileSize(doc: Record<string, unknown>, volatile: readonly string[]): number {
  let size = 0;
  for (const field of volatile) {
    const value = doc[field];
    // Keys are identifiers: no escapes.
    if (value !== undefined) size += field.length + 4 + JSON.stringify(value).length;
  }
  return size;
}

/** Whether `update` changes volatile fields only (then the size it leaves is unchanged). */
export function volatileOnly(update: Update, volatile: readonly string[]): boolean {
  if (volatile.length === 0) return false;
  for (const fields of [update.$set, update.$unset, update.$inc, update.$push]) {
    for (const path of Object.keys(fields ?? {})) if (!volatile.includes(path)) return false;
  }
  return true;
}

/** The 400 a client sees at its storage quota: names the quota and its limit. */
export const storageQuotaExceeded = (limit: number, bytes: number): ApiError =>
  new ApiError(
    "quota_exceeded",
    `Quota storage_bytes reached: this environment of the organization stores at most ${limit} bytes (${bytes} now); delete some data to make room`,
    { quota: "storage_bytes", limit },
  );
