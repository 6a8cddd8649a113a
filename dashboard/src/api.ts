/**
 * The dashboard's only way to the platform: the public /v1 API, with the signed-in key. The
 * resources' types are the server's own (shared/api/wire.ts), never copies.
 */
import { FINISHED_RUN_STATUSES } from "../../shared/api/wire";

export type { Environment } from "../../shared/storage/types";
export type {
  ApiKey,
  Attempt,
  AuditEntry,
  BulkAction,
  BulkJob,
  BulkJobFilter,
  Delivery,
  DeliveryDetail,
  EventType,
  HookRequest,
  Me,
  NewApiKey,
  OutcomeReport,
  PageMeta,
  PlatformEvent,
  Recovery,
  Run,
  RunStatus,
  Schedule,
  UsageBucket,
  UsageReport,
  Webhook,
  WebhookWithSecret,
  Workflow,
  WorkflowVersion,
  WorkflowWithSecret,
} from "../../shared/api/wire";

/** An error in the API's shape (`{error: {type, code, message, param?, request_id}}`), or a network failure. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param?: string,
    readonly requestId?: string,
  ) {
    super(message);
  }
}

export type Query = Record<string, string | number | undefined | null>;

export function pathWith(path: string, query?: Query): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/**
 * One API call. POSTs carry a fresh Idempotency-Key, so a click repeated after a lost answer is
 * not done twice by the server.
 */
export async function call<T>(key: string, method: "GET" | "POST" | "PATCH" | "DELETE", path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Authorization: `Bearer ${key}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method === "POST") headers["Idempotency-Key"] = crypto.randomUUID();
  let res: Response;
  try {
    res = await fetch(`/v1${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  } catch {
    throw new ApiFailure(0, "network_error", "The platform could not be reached. Check your connection and try again.");
  }
  const text = await res.text();
  let parsed: any = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: a proxy's page, say. Reported below with the status.
  }
  if (!res.ok) {
    const err = parsed?.error;
    // The key stopped working (revoked, expired): the app signs out and says why.
    if (res.status === 401) dispatchEvent(new CustomEvent("dashboard:unauthorized", { detail: err?.message ?? "Your key was refused" }));
    if (err && typeof err.message === "string") throw new ApiFailure(res.status, err.code, err.message, err.param, err.request_id);
    throw new ApiFailure(res.status, "unexpected_response", `The platform answered ${res.status} ${res.statusText}`.trim());
  }
  return (parsed?.meta ? parsed : parsed?.data) as T;
}

export const TERMINAL_RUN: ReadonlySet<string> = new Set(FINISHED_RUN_STATUSES);
