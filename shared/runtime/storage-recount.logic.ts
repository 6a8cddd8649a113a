import { tenantOf, usageId, type StoragePolicy, storedSize } from "../records/storage-quota";
import type { Environment, Tenant } from "../storage/types";

/** The bytes of one tenant's counted documents, as measured from the documents themselves. */
export interface TenantBytes {
  org_id: string;
  environment: Environment;
  bytes: number;
}

/** Adds each document of `docs` to its tenant's sum in `sums` (by counter id); documents of no organization count for no one. */
export function addSizes(sums: Map<string, TenantBytes>, docs: readonly Record<string, unknown>[], policy: StoragePolicy): void {
  for (const doc of docs) {
    const tenant = tenantOf(doc);
    if (!tenant) continue;
    const key = usageId(tenant);
    const entry = sums.get(key) ?? { ...tenant, bytes: 0 };
    entry.bytes += storedSize(doc, policy.volatile);
    sums.set(key, entry);
  }
}

/** A counter row as read: its id, tenant and count. */
export interface CounterRow {
  id: string;
  org_id: string;
  environment?: Environment;
  bytes: number;
}

/**
 * One counter row to set right: `before` its count (null: no row), `after` what the documents
 * measure (null: the tenant has nothing left, the row goes).
 */
export interface CounterFix {
  id: string;
  org_id: string;
  environment: Environment;
  before: number | null;
  after: number | null;
}

/**
 * What to change so that the counter rows `rows` say exactly `measured`: a row whose count differs
 * is set, a tenant measured with no row gets one, a row of a tenant with nothing measured is
 * removed (a row of a malformed count too). In counter id order, so the output reads the same each run.
 */
export function counterFixes(measured: ReadonlyMap<string, TenantBytes>, rows: readonly CounterRow[]): CounterFix[] {
  const fixes: CounterFix[] = [];
  const seen = new Set<string>();
  for (const row of rows) {
    seen.add(row.id);
    const before = typeof row.bytes === "number" && Number.isFinite(row.bytes) ? row.bytes : Number.NaN;
    const environment: Environment = row.environment === "test" ? "test" : "live";
    const after = measured.get(row.id)?.bytes ?? null;
    if (after !== before) fixes.push({ id: row.id, org_id: row.org_id, environment, before, after });
  }
  for (const [id, want] of measured)
    if (!seen.has(id)) fixes.push({ id, org_id: want.org_id, environment: want.environment, before: null, after: want.bytes });
  return fixes.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** What a fix changes of the tenant's count: a row missing counts as 0, a malformed count as 0. */
export const difference = (fix: Pick<CounterFix, "before" | "after">): number =>
  (fix.after ?? 0) - (fix.before === null || Number.isNaN(fix.before) ? 0 : fix.before);

/** The tenant of a fix, as a store scope. */
export const fixTenant = (fix: CounterFix): Required<Tenant> => ({ org_id: fix.org_id, environment: fix.environment });
