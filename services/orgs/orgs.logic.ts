import { ApiError, invalidParam, notFound } from "../../shared/errors";
import type { AuditRecord } from "../../shared/records/audit";
import type { Actor, AuditEntry } from "../../shared/api/wire";
import type { Role } from "./orgs.params";

export interface OrgDoc {
  id: string;
  /** Equal to `id`: every stored document names its organization, so one tenant rule fits all. */
  org_id: string;
  name: string;
  api_version: string;
  created_at: string;
  updated_at: string;
}

export interface MemberDoc {
  id: string;
  org_id: string;
  email: string;
  role: Role;
  created_at: string;
  updated_at: string;
  /** The audit trail of the member's role: who last changed it, and when (absent: never changed). */
  role_changed_by?: Actor;
  role_changed_at?: string;
}

export const ENVIRONMENTS = [
  { id: "live", name: "Live", description: "Production data; reached with svc_live_ keys" },
  { id: "test", name: "Test", description: "Sandbox data; reached with svc_test_ keys" },
] as const;

export const orgView = (doc: OrgDoc) => ({
  object: "organization" as const,
  id: doc.id,
  name: doc.name,
  api_version: doc.api_version,
  created_at: doc.created_at,
  updated_at: doc.updated_at,
});

export const memberView = (doc: MemberDoc) => ({
  object: "member" as const,
  id: doc.id,
  org_id: doc.org_id,
  email: doc.email,
  role: doc.role,
  role_changed_by: doc.role_changed_by ?? null,
  role_changed_at: doc.role_changed_at ?? null,
  created_at: doc.created_at,
  updated_at: doc.updated_at,
});

/** A key reaches only its own organization; any other id is answered as if it did not exist. */
export function checkOwnOrg(callerOrg: string, requested: string): void {
  if (callerOrg !== requested) throw notFound("organization", requested);
}

/** An organization always keeps at least one owner. */
export function checkOwnersLeft(ownersAfter: number): void {
  if (ownersAfter < 1) {
    throw new ApiError("invalid_state", "An organization must keep at least one owner", { param: "role" });
  }
}

export const auditView = (doc: AuditRecord): AuditEntry => ({
  object: "audit_entry",
  id: doc.id,
  environment: doc.environment,
  actor: doc.actor,
  action: doc.action,
  method: doc.method,
  route: doc.route,
  resource: doc.resource,
  request_id: doc.request_id,
  client_address: doc.client_address,
  status: doc.status,
  created_at: doc.created_at,
});

/** GET /audit-log's filters with an index each (and time, a range of ids in every one of them). */
export const AUDIT_FILTERS = ["action", "resource_id", "key_id", "environment"] as const;

/**
 * One indexed filter at a time: two would read one's index and skip what fails the other, a read
 * that grows with the log. Refuses the second one named.
 */
export function checkOneAuditFilter(params: Partial<Record<(typeof AUDIT_FILTERS)[number], string>>): void {
  const given = AUDIT_FILTERS.filter((name) => params[name] !== undefined);
  if (given.length > 1) {
    throw invalidParam(
      given[1],
      `Filter by one of ${AUDIT_FILTERS.join(", ")} at a time (with created_after/created_before); got ${given.join(" and ")}`,
    );
  }
}
