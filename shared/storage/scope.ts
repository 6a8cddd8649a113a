import { ApiError } from "../errors";
import type { Filter, Scope, Update } from "./types";

const IMMUTABLE = ["id", "org_id", "environment", "_id"];

/** The filter an adapter runs: the caller's filter narrowed to the scope's tenant. */
export function scoped(scope: Scope, filter: Filter): Record<string, unknown> {
  if ("all_tenants" in scope) return { ...filter };
  const out: Record<string, unknown> = { ...filter, org_id: scope.org_id };
  if (scope.environment !== undefined) out.environment = scope.environment;
  return out;
}

/** Refuses updates that would move a document to another tenant or rename it. */
export function checkUpdate(update: Update): Update {
  for (const op of Object.values(update) as (Record<string, unknown> | undefined)[]) {
    for (const field of Object.keys(op ?? {})) {
      if (IMMUTABLE.includes(field)) {
        throw new ApiError("internal_error", `storage: an update may not change '${field}'`);
      }
    }
  }
  return update;
}
