import type { Environment } from "../../shared/storage/types";

/** `webhook-dispatcher.redeliver`: a settled delivery of the caller's tenant, as the webhooks service read it. */
export const redeliverParams = {
  $$strict: true,
  org_id: { type: "string", min: 1, max: 100 },
  environment: { type: "enum", values: ["live", "test"] },
  id: { type: "string", min: 1, max: 100 },
  status: { type: "enum", values: ["succeeded", "failed"] },
  series_start: { type: "number", integer: true, min: 0 },
} as const;
export interface RedeliverParams {
  org_id: string;
  environment: Environment;
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
