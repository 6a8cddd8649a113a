import { pageParams, type PageParams } from "../../shared/api/pagination";
import { API_VERSIONS } from "../../shared/api/versions";

export const ROLES = ["owner", "admin", "developer", "viewer"] as const;
export type Role = (typeof ROLES)[number];

const orgId = { type: "string", min: 1, max: 100 } as const;
const memberId = { type: "string", min: 1, max: 100 } as const;

export const createParams = { $$strict: true, name: { type: "string", trim: true, min: 1, max: 200 } } as const;
export interface CreateParams {
  name: string;
}

export const idParams = { $$strict: true, id: orgId } as const;
export interface IdParams {
  id: string;
}

export const updateParams = {
  $$strict: true,
  id: orgId,
  name: { type: "string", trim: true, min: 1, max: 200, optional: true },
  api_version: { type: "enum", values: [...API_VERSIONS], optional: true },
} as const;
export interface UpdateParams {
  id: string;
  name?: string;
  api_version?: string;
}

/** The members and the environments of an organization: a list of it. */
export const orgListParams = { $$strict: true, id: orgId, ...pageParams } as const;
export interface OrgListParams extends PageParams {
  id: string;
}

export const addMemberParams = {
  $$strict: true,
  id: orgId,
  // Precise: refuses empty labels (`a@b..com`) and dots at the ends of the local part.
  email: { type: "email", mode: "precise", normalize: true, max: 254 },
  role: { type: "enum", values: [...ROLES] },
} as const;
export interface AddMemberParams {
  id: string;
  email: string;
  role: Role;
}

export const updateMemberParams = {
  $$strict: true,
  id: orgId,
  member_id: memberId,
  role: { type: "enum", values: [...ROLES] },
} as const;
export interface UpdateMemberParams {
  id: string;
  member_id: string;
  role: Role;
}

export const memberParams = { $$strict: true, id: orgId, member_id: memberId } as const;
export interface MemberParams {
  id: string;
  member_id: string;
}

export const lookupParams = { org_id: { type: "string" } } as const;

const instant = { type: "string", min: 1, max: 64, optional: true } as const;
/** GET /audit-log: newest first, by action, resource, key, environment and time (`created_after` ≤ created_at < `created_before`). */
export const auditLogParams = {
  $$strict: true,
  ...pageParams,
  action: { type: "string", min: 1, max: 100, optional: true },
  resource_id: { type: "string", min: 1, max: 200, optional: true },
  key_id: { type: "string", min: 1, max: 100, optional: true },
  environment: { type: "enum", values: ["live", "test"], optional: true },
  created_after: instant,
  created_before: instant,
} as const;
export interface AuditLogParams extends PageParams {
  action?: string;
  resource_id?: string;
  key_id?: string;
  environment?: "live" | "test";
  created_after?: string;
  created_before?: string;
}

/** Internal (the gateways): a batch of entries to store. */
export const recordAuditParams = {
  $$strict: true,
  entries: { type: "array", min: 1, max: 500, items: { type: "object" } },
} as const;
