import { pageParams, type PageParams } from "../../shared/pagination";
import { API_VERSIONS } from "../../shared/versions";

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
