import { randomBytes } from "node:crypto";

/**
 * Request ids and W3C trace context (https://www.w3.org/TR/trace-context/) as the platform carries
 * them: the gateway takes a client's `X-Request-Id` when well-formed and a valid `traceparent`, puts
 * both in the call's meta, and they travel with what the request started (its event, the deliveries
 * and runs of that event) to the log lines and the outgoing requests.
 */

/** A client's `X-Request-Id` is used as the request's id when it is 1–128 of these characters; else the gateway makes one. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** What the request started carries of it (stored on its event and on the deliveries and runs that follow). */
export interface Trace {
  request_id?: string;
  traceparent?: string;
}

/** `header` when it is a traceparent this version understands: version 00, a trace id and a parent id not all zeros. */
export function validTraceparent(header: unknown): string | undefined {
  if (typeof header !== "string") return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m || m[1] !== "00" || /^0+$/.test(m[2]) || /^0+$/.test(m[3])) return undefined;
  return m[0];
}

/** The traceparent of a new span under `parent`: the same trace id and flags, a new span id. */
export function childTraceparent(parent: string): string {
  const [version, traceId, , flags] = parent.split("-");
  let span = randomBytes(8).toString("hex");
  while (span === "0000000000000000") span = randomBytes(8).toString("hex");
  return `${version}-${traceId}-${span}-${flags}`;
}

/** The fields of `meta` (a call's) worth keeping on what the call starts; none when it carries neither. */
export const traceOf = (meta: Trace | undefined): Trace => ({
  ...(meta?.request_id && { request_id: meta.request_id }),
  ...(meta?.traceparent && { traceparent: meta.traceparent }),
});
