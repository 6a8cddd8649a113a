import { ApiError, invalidParam } from "../../shared/errors";
import { EVENT_TYPE_PATTERN, isReservedType, RESERVED_PREFIXES, RESERVED_TYPES } from "../../shared/records/events";
import { EVENT_DATA_MAX_BYTES } from "./events.params";

/** A client-emitted event's type and data, checked; throws the error a client should see. */
export function checkEmittable(type: string, data: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!EVENT_TYPE_PATTERN.test(type)) {
    throw invalidParam("type", `'${type}' is not an event type: use lower-case dotted names such as 'order.created'`);
  }
  if (isReservedType(type)) {
    throw invalidParam(
      "type",
      `'${type}' is a system event type; clients cannot emit ${[...RESERVED_PREFIXES.map((p) => `${p}*`), ...RESERVED_TYPES].join(", ")}`,
    );
  }
  const body = data ?? {};
  const size = Buffer.byteLength(JSON.stringify(body));
  if (size > EVENT_DATA_MAX_BYTES) {
    throw new ApiError("parameter_invalid", `data is ${size} bytes as JSON; the limit is ${EVENT_DATA_MAX_BYTES}`, { param: "data" });
  }
  return body;
}
