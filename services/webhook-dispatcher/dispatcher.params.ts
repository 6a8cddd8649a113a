import type { Environment } from "../../shared/storage/types";

/** `webhook-dispatcher.redeliver`: a settled delivery of the caller's tenant, as the webhooks service read it. */
export const redeliverParams = {
  $$strict: true,
  org_id: { type: "string", min: 1, max: 100 },
  environment: { type: "enum", values: ["live", "test"] },
  webhook_id: { type: "string", min: 1, max: 100 },
  id: { type: "string", min: 1, max: 100 },
  status: { type: "enum", values: ["succeeded", "failed"] },
  series_start: { type: "number", integer: true, min: 0 },
} as const;
export interface RedeliverParams {
  org_id: string;
  environment: Environment;
  webhook_id: string;
  id: string;
  status: "succeeded" | "failed";
  series_start: number;
}

/** `webhook-dispatcher.forget`: a deleted webhook of an organization. */
export const forgetParams = {
  $$strict: true,
  org_id: { type: "string", min: 1, max: 100 },
  webhook_id: { type: "string", min: 1, max: 100 },
} as const;
export interface ForgetParams {
  org_id: string;
  webhook_id: string;
}

/** The tenant of an internal call from the webhooks service (which checked the caller's webhook). */
export const tenantParams = {
  org_id: { type: "string", min: 1, max: 100 },
  environment: { type: "enum", values: ["live", "test"] },
} as const;
export interface TenantArgs {
  org_id: string;
  environment: Environment;
}

/** `webhook-dispatcher.retryNow`: a pending delivery. */
export const retryNowParams = {
  $$strict: true,
  ...tenantParams,
  webhook_id: { type: "string", min: 1, max: 100 },
  id: { type: "string", min: 1, max: 100 },
} as const;
export type RetryNowParams = TenantArgs & { webhook_id: string; id: string };

/** `webhook-dispatcher.sendTest`: a test event's type and data, for one webhook. */
export const sendTestParams = {
  $$strict: true,
  ...tenantParams,
  webhook_id: { type: "string", min: 1, max: 100 },
  event_type: { type: "string", min: 1, max: 100 },
  data: { type: "object" },
} as const;
export type SendTestParams = TenantArgs & { webhook_id: string; event_type: string; data: Record<string, unknown> };

/** `webhook-dispatcher.recover`: a webhook's failed deliveries created in [since, until) (ms since the epoch). */
export const recoverParams = {
  $$strict: true,
  ...tenantParams,
  webhook_id: { type: "string", min: 1, max: 100 },
  since: { type: "number", integer: true },
  until: { type: "number", integer: true, optional: true },
} as const;
export type RecoverParams = TenantArgs & { webhook_id: string; since: number; until?: number };
