import type { ScopeName } from "./scopes";
import type { Environment } from "./storage/types";

/**
 * The API's resources as a client reads them (an answer's `data`, a list's `meta`): the one
 * definition that the server's stored documents extend with their internal fields and its views
 * return, and that the dashboard reads (dashboard/src/api.ts). Types and lists of values only,
 * nothing that needs Node, so the dashboard's bundle takes nothing of the server with them.
 */

/**
 * A list's answer: `{object: "list", data: [...], meta}`: `meta` as the spec fixes it (`total`,
 * `page`, `per_page`) when read by page, or `total`, `limit`, `has_more` when read by cursor.
 */
export interface List<T> {
  object: "list";
  data: T[];
  meta: PageMeta | CursorMeta;
}

/** A list's `meta` when it is read by page (`?page=&per_page=`). */
export interface PageMeta {
  total: number;
  /** More than `total` (10,000) match: pages reach that far. */
  total_capped?: true;
  page: number;
  per_page: number;
}

/** A list's `meta` when it is read by cursor (`?limit=&starting_after=`). */
export interface CursorMeta {
  total: number;
  total_capped?: true;
  limit: number;
  has_more: boolean;
}

/** GET /me: whose key this is and what it may do. */
export interface Me {
  object: "identity";
  org: { id: string; name: string };
  environment: Environment;
  api_key: Pick<ApiKey, "id" | "name" | "prefix" | "last4" | "scopes" | "expires_at">;
}

export type KeyStatus = "active" | "revoked" | "expired";

export interface ApiKey {
  object: "api_key";
  id: string;
  name: string;
  environment: Environment;
  scopes: ScopeName[];
  status: KeyStatus;
  /** The key's first characters (`svc_live_` and four more), to tell keys apart. */
  prefix: string;
  last4: string;
  created_at: string;
  revoked_at: string | null;
  expires_at: string | null;
  last_used_at: string | null;
}

/** The answer to POST /api-keys, the only one that holds the key itself. */
export type NewApiKey = ApiKey & { key: string };

export interface Webhook {
  object: "webhook";
  id: string;
  environment: Environment;
  url: string;
  events: string[];
  description: string | null;
  status: "enabled" | "disabled";
  /** Why the platform disabled it (failures in a row), or null. */
  disabled_reason: string | null;
  consecutive_failures: number;
  /** Deliveries per second at most, across dispatcher nodes; null: unlimited. */
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
}

/** The answers to POST /webhooks and rotate-secret, the only ones that hold the signing secret. */
export type WebhookWithSecret = Webhook & { secret: string };

export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One try at sending a delivery: a delivery's `attempts` lists them (a run step counts its own in `attempt_count`). */
export interface Attempt {
  number: number;
  at: string;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

export interface Delivery {
  object: "delivery";
  id: string;
  environment: Environment;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: Attempt[];
  next_attempt_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface PlatformEvent {
  object: "event";
  id: string;
  environment: Environment;
  type: string;
  data: Record<string, unknown>;
  /** `api` for events clients emit, else the emitting service. */
  source: string;
  created_at: string;
}

/** One bucket of GET /analytics/usage: requests in an hour or a day, of one route, status or key when grouped. */
export interface UsageBucket {
  start: string;
  route?: string;
  status?: number;
  key_id?: string;
  count: number;
  errors: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

export interface UsageReport {
  object: "usage_report";
  from: string;
  to: string;
  granularity: "hour" | "day";
  group_by: "route" | "status" | "key" | null;
  buckets: UsageBucket[];
}

/** Runs that ended in a window, or webhook deliveries created in it, by status. */
export interface Outcomes {
  total: number;
  by_status: Record<string, number>;
  success_rate: number | null;
  /** Webhooks only: how many attempts were made and how they ended, and the success rate of the deliveries that settled. */
  attempt_counts?: { total: number; succeeded: number; failed: number };
  delivery_success_rate?: number | null;
}

/** GET /analytics/workflows and /analytics/webhooks: the window's outcomes, in all and per workflow or webhook. */
export type OutcomeReport = Outcomes & {
  object: "outcome_report";
  from: string;
  to: string;
  workflows?: (Outcomes & { workflow_id: string })[];
  webhooks?: (Outcomes & { webhook_id: string })[];
};

export type Trigger = { type: "manual" } | { type: "event"; event_type: string };

export const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

export interface HttpStep {
  id: string;
  type: "http";
  method: (typeof HTTP_METHODS)[number];
  url: string;
  headers: Record<string, string>;
  body: unknown;
  timeout_ms: number;
  retries: number;
}
export interface DelayStep {
  id: string;
  type: "delay";
  duration_ms: number;
}
export interface ApprovalStep {
  id: string;
  type: "approval";
  message: string | null;
}
export interface EmitStep {
  id: string;
  type: "emit";
  event_type: string;
  data: Record<string, unknown>;
}
export type Step = HttpStep | DelayStep | ApprovalStep | EmitStep;

export interface Workflow {
  object: "workflow";
  id: string;
  environment: Environment;
  name: string;
  description: string | null;
  status: "active" | "inactive";
  trigger: Trigger;
  steps: Step[];
  version: number;
  created_at: string;
  updated_at: string;
}

export const RUN_STATUSES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** A run in one of these has ended: nothing changes it any more. */
export const FINISHED_RUN_STATUSES = ["succeeded", "failed", "cancelled"] as const satisfies readonly RunStatus[];

export type StepStatus = "pending" | "running" | "waiting" | "succeeded" | "failed" | "cancelled" | "skipped";

export interface RunStep {
  id: string;
  type: Step["type"];
  status: StepStatus;
  output: unknown;
  error: string | null;
  /** How many times the step was tried (a delivery's `attempts` is the list of its tries). */
  attempt_count: number;
  started_at: string | null;
  finished_at: string | null;
}

export type RunTrigger = { type: "manual" } | { type: "event"; event_id: string; event_type: string };

export interface Run {
  object: "run";
  id: string;
  environment: Environment;
  workflow_id: string;
  workflow_version: number;
  status: RunStatus;
  input: Record<string, unknown>;
  steps: RunStep[];
  trigger: RunTrigger;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** GET /events/types: a type the platform emits, or a custom one this environment has emitted. */
export type EventType =
  | { object: "event_type"; type: string; description: string; system: true }
  | { object: "event_type"; type: string; description: null; system: false; first_seen_at: string };

/** GET /orgs/{id}/environments: the two every organization has. */
export interface EnvironmentInfo {
  object: "environment";
  id: Environment;
  org_id: string;
  name: string;
  description: string;
}
