import { pageParams, type PageParams } from "../../shared/api/pagination";
import { SCOPE_NAMES } from "../../shared/api/scopes";
import type { Environment } from "../../shared/storage/types";

const environment = { type: "enum", values: ["live", "test"], optional: true } as const;

export const createParams = {
  $$strict: true,
  name: { type: "string", trim: true, min: 1, max: 200 },
  // Names are checked one by one in the logic so the error can say which scope is unknown.
  scopes: { type: "array", items: { type: "string", min: 1, max: 64 }, min: 1, max: SCOPE_NAMES.length },
  environment,
  /** null or absent: the key never expires (as the key answers it). */
  expires_at: { type: "string", optional: true, nullable: true, max: 40 },
} as const;
export interface CreateParams {
  name: string;
  scopes: string[];
  environment?: Environment;
  expires_at?: string | null;
}

export const listParams = {
  $$strict: true,
  ...pageParams,
} as const;
export type ListParams = PageParams;

/** Internal: keys the platform issues itself (the bootstrap CLI's first keys). */
export const issueParams = {
  org_id: { type: "string" },
  environment: { type: "enum", values: ["live", "test"] },
  name: { type: "string", min: 1, max: 200 },
  scopes: { type: "array", items: { type: "enum", values: SCOPE_NAMES }, min: 1 },
} as const;
export interface IssueParams {
  org_id: string;
  environment: Environment;
  name: string;
  scopes: string[];
}

export const digestParams = { digest: { type: "string", length: 64 } } as const;

export const touchParams = {
  uses: { type: "array", items: { type: "object", props: { key_id: "string", org_id: "string", at: "string" } }, max: 10000 },
} as const;
export interface TouchParams {
  uses: { key_id: string; org_id: string; at: string }[];
}

export { idParams, type IdParams } from "../../shared/api/pagination";
