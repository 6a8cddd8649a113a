import { Errors } from "moleculer";

/**
 * Every error a client can see, by its stable `code`, with the HTTP status and error `type` it maps
 * to. Services throw `ApiError(code, …)`; the gateway renders it. The `code` travels as Moleculer's
 * `type` field and the HTTP status as its numeric `code`, so the mapping survives a NATS hop, where
 * errors come back as plain objects (never rely on `instanceof`).
 */
export const ERROR_CODES = {
  parameter_invalid: { status: 400, type: "invalid_request_error" },
  parameter_missing: { status: 400, type: "invalid_request_error" },
  parameter_unknown: { status: 400, type: "invalid_request_error" },
  invalid_json: { status: 400, type: "invalid_request_error" },
  invalid_version: { status: 400, type: "invalid_request_error" },
  unsupported_version: { status: 400, type: "invalid_request_error" },
  url_not_allowed: { status: 400, type: "invalid_request_error" },
  missing_api_key: { status: 401, type: "authentication_error" },
  invalid_api_key: { status: 401, type: "authentication_error" },
  api_key_revoked: { status: 401, type: "authentication_error" },
  api_key_expired: { status: 401, type: "authentication_error" },
  /** An inbound webhook (POST /hooks/{hook_id}) whose signature does not verify: nothing of it is stored. */
  invalid_signature: { status: 401, type: "authentication_error" },
  insufficient_scope: { status: 403, type: "permission_error" },
  resource_not_found: { status: 404, type: "not_found_error" },
  route_not_found: { status: 404, type: "not_found_error" },
  method_not_allowed: { status: 405, type: "invalid_request_error" },
  idempotency_key_reused: { status: 409, type: "conflict_error" },
  idempotency_key_in_use: { status: 409, type: "conflict_error" },
  invalid_state: { status: 409, type: "conflict_error" },
  resource_exists: { status: 409, type: "conflict_error" },
  /** An organization's count quota (webhooks, keys, workflows) is reached; as Stripe answers its object limits. */
  quota_exceeded: { status: 400, type: "invalid_request_error" },
  payload_too_large: { status: 413, type: "invalid_request_error" },
  unsupported_media_type: { status: 415, type: "invalid_request_error" },
  /** The headers or the body did not arrive within HTTP_HEADERS_TIMEOUT_MS / HTTP_BODY_TIMEOUT_MS; the connection is closed. */
  request_timeout: { status: 408, type: "invalid_request_error" },
  rate_limited: { status: 429, type: "rate_limit_error" },
  internal_error: { status: 500, type: "api_error" },
  service_unavailable: { status: 503, type: "api_error" },
  storage_unavailable: { status: 503, type: "api_error" },
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ApiErrorData {
  param?: string;
  /** Seconds a client should wait before retrying (429, 503). */
  retry_after?: number;
  [extra: string]: unknown;
}

/** A failure a client caused or may retry; rendered by the gateway as `{error: {type, code, …}}`. */
export class ApiError extends Errors.MoleculerError {
  constructor(code: ErrorCode, message: string, data: ApiErrorData = {}) {
    super(message, ERROR_CODES[code].status, code, data);
    this.name = "ApiError";
    this.retryable = ERROR_CODES[code].status >= 500;
  }
}

export const notFound = (what: string, id: string): ApiError =>
  new ApiError("resource_not_found", `No such ${what}: '${id}'`, { param: "id" });

export const invalidParam = (param: string, message: string): ApiError => new ApiError("parameter_invalid", message, { param });

/** At most this many characters of a value sent are echoed in a message. */
const ECHO_MAX = 80;

/** A value the client sent, for a message: as JSON (quotes, newlines and control characters escaped), cut to ECHO_MAX. */
export function echo(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > ECHO_MAX ? `${text.slice(0, ECHO_MAX)}…` : text;
}

/** A value outside an enum: names the field, the allowed values and the value received. */
export const notOneOf = (param: string, allowed: readonly unknown[], value: unknown): ApiError =>
  invalidParam(param, `${param} must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}; received ${echo(value)}`);

/** Raised by a storage adapter when a unique index would be violated. */
export class DuplicateKeyError extends ApiError {
  constructor(collection: string, fields: string[] = []) {
    super("resource_exists", `A record with the same ${fields.join(", ") || "key"} already exists in ${collection}`, {
      collection,
      fields,
    });
    this.name = "DuplicateKeyError";
  }
}

/**
 * A unique index refused the write (a DuplicateKeyError, also when it crossed the broker from the
 * store node and arrives as a plain error of that type).
 */
export const isDuplicate = (err: unknown): boolean => (err as { type?: string } | null)?.type === "resource_exists";

export const isErrorCode = (value: unknown): value is ErrorCode =>
  typeof value === "string" && Object.prototype.hasOwnProperty.call(ERROR_CODES, value);
