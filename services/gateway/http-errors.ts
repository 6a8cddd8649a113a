import { echo, ERROR_CODES, isErrorCode, type ErrorCode } from "../../shared/errors";
import { formatPath } from "../../shared/api/json-limits";
import { unknownParameters } from "./request.logic";

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

/** "1 item", "3 items": a limit as people write it. */
const count = (n: unknown, noun: string) => `${String(n)} ${noun}${Number(n) === 1 ? "" : "s"}`;

/** One failure as fastest-validator reports it (also as a plain object after a NATS hop). */
export interface ValidationFailure {
  type?: string;
  field?: string;
  message?: string;
  actual?: unknown;
  expected?: unknown;
}

/** An enum's values as fastest-validator hands them (an array, or joined with ", "), each as JSON. */
const allowedOf = (expected: unknown): string =>
  (Array.isArray(expected) ? expected : String(expected ?? "").split(", ")).map((v) => JSON.stringify(v)).join(", ");

const KINDS: Record<string, string> = {
  string: "a string",
  number: "a number",
  boolean: "a boolean (true or false)",
  array: "an array",
  object: "an object",
  email: "a valid e-mail address",
  url: "an absolute http(s) URL",
  date: "a date",
  uuid: "a UUID",
  function: "a function",
  tuple: "an array",
  record: "an object",
};

/**
 * One message per rule kind, naming the field, the rule and what was received: the value itself
 * (JSON, cut short) where the rule is about the value, its length or count where it is about that.
 */
export function validationMessage(f: ValidationFailure): string {
  const field = f.field || "body";
  const got = `received ${echo(f.actual)}`;
  const n = f.expected;
  // A rule's own wording (`messages` in its schema) says what the value should be better than a pattern.
  if (f.message && !f.message.startsWith("The ")) return `${field}: ${f.message}; ${got}`;
  switch (f.type) {
    case "required":
      return f.actual === null ? `${field} cannot be null; leave it out instead` : `${field} is required`;
    case "enumValue":
    case "stringEnum":
      return `${field} must be one of ${allowedOf(f.expected)}; ${got}`;
    case "arrayEnum":
      return `${field} may only hold ${allowedOf(f.expected)}; ${got}`;
    case "equalValue":
      return `${field} must be ${echo(f.expected)}; ${got}`;
    case "stringEmpty":
    case "emailEmpty":
    case "urlEmpty":
      return `${field} cannot be empty`;
    case "stringMin":
    case "emailMin":
      return `${field} must be at least ${count(n, "character")} long; received ${String(f.actual)}`;
    case "stringMax":
    case "emailMax":
      return `${field} must be at most ${count(n, "character")} long; received ${String(f.actual)}`;
    case "stringLength":
      return `${field} must be exactly ${count(n, "character")} long; received ${String(f.actual)}`;
    case "stringPattern":
      return `${field} must match the pattern ${String(n)}; ${got}`;
    case "stringContains":
      return `${field} must contain ${echo(n)}; ${got}`;
    case "stringNumeric":
    case "stringAlpha":
    case "stringAlphanum":
    case "stringAlphadash":
    case "stringHex":
    case "stringSingleLine":
      return `${field} has characters it may not hold (${f.type.slice("string".length).toLowerCase()} only); ${got}`;
    case "numberMin":
      return `${field} must be at least ${String(n)}; ${got}`;
    case "numberMax":
      return `${field} must be at most ${String(n)}; ${got}`;
    case "numberEqual":
      return `${field} must be ${String(n)}; ${got}`;
    case "numberNotEqual":
      return `${field} cannot be ${String(n)}`;
    case "numberInteger":
      return `${field} must be a whole number; ${got}`;
    case "numberPositive":
      return `${field} must be positive; ${got}`;
    case "numberNegative":
      return `${field} must be negative; ${got}`;
    case "arrayEmpty":
      return `${field} cannot be an empty array`;
    case "arrayMin":
      return `${field} must hold at least ${count(n, "item")}; received ${String(f.actual)}`;
    case "arrayMax":
      return `${field} must hold at most ${count(n, "item")}; received ${String(f.actual)}`;
    case "arrayLength":
      return `${field} must hold exactly ${count(n, "item")}; received ${String(f.actual)}`;
    case "arrayUnique":
      return `${field} may not repeat an item; repeated ${echo(f.actual)}`;
    case "objectMinProps":
      return `${field} must have at least ${count(n, "field")}; received ${String(f.actual)}`;
    case "objectMaxProps":
      return `${field} must have at most ${count(n, "field")}; received ${String(f.actual)}`;
    case "dateMin":
    case "dateMax":
      return `${field} is ${f.type === "dateMin" ? "earlier" : "later"} than ${String(n)} allows; ${got}`;
    case "forbidden":
      return `${field} cannot be sent`;
  }
  const kind = f.type === undefined ? undefined : KINDS[f.type];
  if (kind !== undefined) return `${field} must be ${kind}; ${got}`;
  return `${f.message || `${field} is invalid`} (${got})`;
}

function fromValidation(data: unknown): HttpError {
  const first = (Array.isArray(data) ? data[0] : undefined) as ValidationFailure | undefined;
  if (first?.type === "objectStrict") {
    // The validator lists every unknown key, comma-separated: the message names a few.
    const names = String(first.actual ?? "")
      .split(",")
      .map((name) => name.trim());
    const { message } = unknownParameters(names);
    // Inside a nested object (`filter`) `param` is the field's whole path, as any other error's.
    const param = first.field ? formatPath([names[0]], first.field) : names[0];
    return { status: 400, code: "parameter_unknown", message, param };
  }
  const param = first?.field || undefined;
  const code: ErrorCode = first?.type === "required" && first.actual !== null ? "parameter_missing" : "parameter_invalid";
  return { status: 400, code, message: first ? validationMessage(first) : "Invalid parameters", param };
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
