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
  data?: any;
}

const UNAVAILABLE = new Set([
  "ServiceNotFoundError",
  "ServiceNotAvailableError",
  "RequestTimeoutError",
  "RequestSkippedError",
  "RequestRejectedError",
  "BrokerDisconnectedError",
  "QueueIsFullError",
]);

function fromValidation(data: unknown): HttpError {
  const first = (Array.isArray(data) ? data[0] : undefined) as
    { type?: string; field?: string; message?: string; actual?: unknown } | undefined;
  if (first?.type === "objectStrict") {
    const param = String(first.actual ?? "")
      .split(",")[0]
      .trim();
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
    return {
      status: 503,
      code: "service_unavailable",
      message: "A service this request needs is unavailable; retry shortly",
      retryAfter: 1,
    };
  }
  return { status: 500, code: "internal_error", message: "An internal error occurred; it has been logged" };
}
