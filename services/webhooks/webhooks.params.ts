import { DELIVERY_STATUSES, type DeliveryStatus } from "../../shared/records/deliveries";
import { idParam, pageParams, type PageParams } from "../../shared/api/pagination";

const id = idParam;
// The URL's rules (https, no private targets) are checked in the logic, to say which one failed.
const url = { type: "string", min: 1, max: 2048 } as const;
const events = { type: "array", items: { type: "string", min: 1, max: 100 }, min: 1, max: 100 } as const;
/** null or absent: no description (as the webhook answers it). */
const description = { type: "string", trim: true, max: 500, optional: true, nullable: true } as const;
/** Deliveries per second at most (Svix's `rateLimit`); null or absent: as fast as the receiver answers. */
export const RATE_LIMIT_MAX = 10_000;
const rate_limit = { type: "number", integer: true, min: 1, max: RATE_LIMIT_MAX, optional: true, nullable: true } as const;

export const createParams = { $$strict: true, url, events, description, rate_limit } as const;
export interface CreateParams {
  url: string;
  events: string[];
  description?: string | null;
  rate_limit?: number | null;
}

export const listParams = {
  $$strict: true,
  ...pageParams,
  status: { type: "enum", values: ["enabled", "disabled"], optional: true },
} as const;
export interface ListParams extends PageParams {
  status?: "enabled" | "disabled";
}

export const updateParams = {
  $$strict: true,
  id,
  url: { ...url, optional: true },
  events: { ...events, optional: true },
  description,
  rate_limit,
  status: { type: "enum", values: ["enabled", "disabled"], optional: true },
} as const;
export interface UpdateParams {
  id: string;
  url?: string;
  events?: string[];
  description?: string | null;
  rate_limit?: number | null;
  status?: "enabled" | "disabled";
}

/** ISO 8601 times; their shape is checked by `timeOf` (to name the parameter and the format). */
const time = { type: "string", min: 1, max: 40, optional: true } as const;

/** The delivery log's filters; each reads along an index of the delivery log (shared/records/deliveries.ts). */
export const deliveriesParams = {
  $$strict: true,
  id,
  ...pageParams,
  status: { type: "enum", values: [...DELIVERY_STATUSES], optional: true },
  event_type: { type: "string", min: 1, max: 100, optional: true },
  event_id: { type: "string", min: 1, max: 100, optional: true },
  created_after: time,
  created_before: time,
} as const;
export interface DeliveriesParams extends PageParams {
  id: string;
  status?: DeliveryStatus;
  event_type?: string;
  event_id?: string;
  created_after?: string;
  created_before?: string;
}

export const eventDeliveriesParams = { $$strict: true, id, ...pageParams } as const;
export interface EventDeliveriesParams extends PageParams {
  id: string;
}

/** The largest `data` a test event may carry, as JSON: the same as an event's (POST /events). */
export const TEST_DATA_MAX_BYTES = 64 * 1024;
export const testParams = {
  $$strict: true,
  id,
  event_type: { type: "string", min: 1, max: 100, optional: true },
  data: { type: "object", optional: true },
} as const;
export interface TestParams {
  id: string;
  event_type?: string;
  /** The test event's data as given, instead of the type's example. */
  data?: Record<string, unknown>;
}

export const recoverParams = { $$strict: true, id, since: { ...time, optional: false }, until: time } as const;
export interface RecoverParams {
  id: string;
  since: string;
  until?: string;
}

export const recoveryParams = { $$strict: true, id, job_id: id } as const;
export interface RecoveryParams {
  id: string;
  job_id: string;
}

export const deliveryParams = { $$strict: true, id, delivery_id: id } as const;
export interface DeliveryParams {
  id: string;
  delivery_id: string;
}

export const subscribersParams = {
  org_id: { type: "string", min: 1 },
  environment: { type: "enum", values: ["live", "test"] },
} as const;

export const targetParams = { org_id: { type: "string", min: 1 }, id } as const;

export const outcomeParams = { org_id: { type: "string", min: 1 }, id, ok: "boolean" } as const;
export interface OutcomeParams {
  org_id: string;
  id: string;
  ok: boolean;
}

export { idParams, type IdParams } from "../../shared/api/pagination";
