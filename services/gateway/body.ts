import type { IncomingMessage } from "node:http";
import { ApiError } from "../../shared/errors";
import {
  BODY_LIMITS,
  formatPath,
  MAX_JSON_DEPTH,
  MAX_JSON_ITEMS,
  MAX_JSON_KEYS,
  MAX_JSON_OBJECT_KEYS,
  parseJsonWithinLimits,
  type JsonFault,
} from "../../shared/api/json-limits";

export const BODY_LIMIT = 1024 * 1024;

export const hasBody = (req: IncomingMessage): boolean =>
  req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

const tooLarge = () => new ApiError("payload_too_large", `The request body is over ${BODY_LIMIT} bytes (1 MiB)`);

/**
 * The request's JSON object, or undefined when it sent no body. Refuses other media types (415),
 * bodies over 1 MiB (413, without reading them whole), anything but a JSON object (400
 * `invalid_json`), and, naming the field (400 `parameter_invalid`), objects and arrays nested more
 * than MAX_JSON_DEPTH levels deep (the body is level 1), objects of more than MAX_JSON_OBJECT_KEYS
 * keys, bodies of more than MAX_JSON_KEYS keys or MAX_JSON_ITEMS array items in all, numbers a
 * double does not hold exactly (`1e400`, `9007199254740993`, `-0`), and strings or keys that are not
 * well-formed Unicode (lone UTF-16 surrogates sent as `\ud800` escapes). The limits are checked on
 * the text, before anything is built. See shared/api/json-limits.ts.
 * A body not all received within `timeoutMs` answers 408 `request_timeout` (the caller closes the
 * connection): a slow sender holds a socket for that long at most.
 */
export async function readJsonBody(req: IncomingMessage, timeoutMs: number): Promise<Record<string, unknown> | undefined> {
  if (!hasBody(req)) return undefined;
  if (!JSON_TYPE.test(req.headers["content-type"] ?? "")) {
    throw new ApiError("unsupported_media_type", "Request bodies must be JSON, sent with Content-Type: application/json");
  }
  if (Number(req.headers["content-length"] ?? 0) > BODY_LIMIT) throw tooLarge();
  const raw = await readRawBody(req, timeoutMs, BODY_LIMIT);
  const text = raw.toString("utf8");
  const checked = parseJsonWithinLimits(text, BODY_LIMITS);
  if (!checked.ok && checked.kind === "invalid_json") throw new ApiError("invalid_json", "The request body is not valid JSON");
  const parsed = checked.ok ? checked.value : undefined;
  // (A valid body refused for its shape or its text comes without its value: its first character
  // says whether it is an object.)
  if (checked.ok ? typeof parsed !== "object" || parsed === null || Array.isArray(parsed) : !/^[ \t\n\r]*\{/.test(text)) {
    throw new ApiError("invalid_json", "The request body must be a JSON object");
  }
  if (!checked.ok) throw faultError(checked);
  return parsed as Record<string, unknown>;
}

/** A body's fault as the contract's error, naming where it is (the body itself has no name). */
function faultError(fault: JsonFault): ApiError {
  const param = formatPath(fault.path);
  const subject = param === "" ? "The request body" : param;
  const named = param === "" ? {} : { param };
  switch (fault.kind) {
    case "too_deep":
      return new ApiError(
        "parameter_invalid",
        `${param} is nested too deep: request bodies may nest objects and arrays ${MAX_JSON_DEPTH} levels deep (the body itself is level 1)`,
        { param },
      );
    case "too_wide":
      return new ApiError(
        "parameter_invalid",
        `${subject} has more than ${MAX_JSON_OBJECT_KEYS} keys: an object in a request body holds at most ${MAX_JSON_OBJECT_KEYS}`,
        named,
      );
    case "too_many_keys":
      return new ApiError(
        "parameter_invalid",
        `The request body holds more than ${MAX_JSON_KEYS} keys in all (its objects' keys at every level together)`,
        named,
      );
    case "too_many_items":
      return new ApiError(
        "parameter_invalid",
        `The request body holds more than ${MAX_JSON_ITEMS} array items in all (its arrays' items at every level together)`,
        named,
      );
    case "inexact_number":
      return new ApiError(
        "parameter_invalid",
        `${param} is a number the store cannot hold exactly (past the range or precision of a 64-bit double, or a negative zero); send it as a string`,
        { param },
      );
    case "not_well_formed":
      return new ApiError(
        "parameter_invalid",
        `${fault.key ? `The key of ${param}` : param} is not well-formed Unicode: it holds a lone UTF-16 surrogate (an escape such as \\ud800 without its pair)`,
        { param },
      );
  }
}

/**
 * The request's body, whole, as sent: over `limit` bytes it answers 413 (and drains the rest, so the
 * answer can still be written), and not all received within `timeoutMs` 408 `request_timeout`.
 */
export function readRawBody(req: IncomingMessage, timeoutMs: number, limit: number): Promise<Buffer> {
  const tooLarge = () =>
    new ApiError(
      "payload_too_large",
      `The request body is over ${limit} bytes (${limit >= 1024 * 1024 ? `${limit / 1024 / 1024} MiB` : `${limit / 1024} KiB`})`,
    );
  return new Promise<Buffer>((ok, fail) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(
      () => {
        req.off("data", onData);
        fail(new ApiError("request_timeout", `The request body did not arrive within ${timeoutMs} ms`));
      },
      Math.max(0, timeoutMs),
    );
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      // Stop keeping it, but drain the rest so the 413 can still be written on this socket.
      clearTimeout(timer);
      req.off("data", onData);
      req.resume();
      fail(tooLarge());
    };
    req.on("data", onData);
    req.once("end", () => {
      clearTimeout(timer);
      ok(Buffer.concat(chunks, size));
    });
    req.once("error", (err) => {
      clearTimeout(timer);
      fail(err);
    });
  });
}
