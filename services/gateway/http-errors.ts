import { ERROR_CODES, isErrorCode, type ErrorCode } from "../../shared/errors";

export interface HttpError {
  status: number;
  code: ErrorCode;
  message: string;
  param?: string;
  retryAfter?: number;
}

interface AnyError {
  name?: string;
  message?: string;
  code?: unknown;
  type?: unknown;
  status?: unknown;
  data?: any;
}

const UNAVAILABLE = new Set([
  "ServiceNotFoundError",
  "ServiceNotAvailableError",
  "ServiceUnavailableError",
  "RequestTimeoutError",
  "RequestSkippedError",
  "RequestRejectedError",
  "BrokerDisconnectedError",
  "QueueIsFullError",
]);

function fromValidation(data: unknown): HttpError {
  const first = (Array.isArray(data) ? data[0] : undefined) as { type?: string; field?: string; message?: string; actual?: unknown } | undefined;
  if (first?.type === "objectStrict") {
    const param = String(first.actual ?? "").split(",")[0].trim();
    return { status: 400, code: "parameter_unknown", message: `Received unknown parameter: ${first.actual}`, param };
  }
  const param = first?.field || undefined;
  const code: ErrorCode = first?.type === "required" ? "parameter_missing" : "parameter_invalid";
  return { status: 400, code, message: first?.message ?? "Invalid parameters", param };
}

/**
 * The one mapping from anything thrown to the contract's error. It reads `name`/`type` only, since
 * errors that crossed NATS are rebuilt as plain objects; anything unknown is a 500 that says nothing
 * about the internals.
 */
export function toHttpError(raw: unknown): HttpError {
  const err = (raw ?? {}) as AnyError;
  if (isErrorCode(err.type)) {
    const data = (err.data ?? {}) as { param?: string; retry_after?: number };
    return {
      status: ERROR_CODES[err.type].status,
      code: err.type,
      message: err.message ?? err.type,
      param: data.param,
      retryAfter: data.retry_after,
    };
  }
  if (err.name === "ValidationError") return fromValidation(err.data);
  if (err.name && UNAVAILABLE.has(err.name)) {
    return { status: 503, code: "service_unavailable", message: "A service this request needs is unavailable; retry shortly", retryAfter: 1 };
  }
  // body-parser's errors carry their own `type`.
  if (err.type === "entity.too.large") {
    return { status: 413, code: "payload_too_large", message: "The request body is over 1 MiB" };
  }
  if (err.type === "entity.parse.failed") {
    return { status: 400, code: "invalid_json", message: "The request body is not valid JSON" };
  }
  if (err.type === "encoding.unsupported" || err.type === "charset.unsupported") {
    return { status: 415, code: "unsupported_media_type", message: err.message ?? "Unsupported body encoding" };
  }
  if (err.name === "NotFoundError") return { status: 404, code: "route_not_found", message: "No such route" };
  return { status: 500, code: "internal_error", message: "An internal error occurred; it has been logged" };
}
