import { invalidParam } from "../../shared/errors";
import { EVENT_EXAMPLES } from "../../shared/records/event-examples";
import { TEST_DATA_MAX_BYTES } from "./webhooks.params";
import { EVENT_TYPE_PATTERN, isReservedType, isSystemType } from "../../shared/records/events";
import { QUOTAS } from "../../shared/records/quotas";
import type { Environment } from "../../shared/storage/types";
import type { Webhook } from "../../shared/api/wire";

export { DISABLE_AFTER_FAILURES } from "../../shared/records/deliveries";
/** Secrets that sign one delivery at most: the current one and the last rotated out. */
export const SIGNING_SECRETS_MAX = QUOTAS.signing_secrets_per_webhook;
export { generateSecret, ROTATION_OVERLAP_MS } from "../../shared/net/signing";

/** A webhook as stored: what the API shows (shared/api/wire.ts) and its signing secrets. */
export interface WebhookDoc extends Omit<Webhook, "object" | "rate_limit"> {
  org_id: string;
  /** Absent on webhooks stored before it existed: read as null. */
  rate_limit?: number | null;
  secret: string;
  previous_secrets: { secret: string; expires_at: string }[];
}

export type WebhookView = Webhook;

/** What the dispatcher needs to send: where, and every secret that signs now (current first). */
export interface Target {
  id: string;
  org_id: string;
  environment: Environment;
  url: string;
  events: string[];
  status: "enabled" | "disabled";
  secrets: string[];
  consecutive_failures: number;
  rate_limit: number | null;
}

export const webhookView = ({ org_id: _o, secret: _s, previous_secrets: _p, ...view }: WebhookDoc): WebhookView => ({
  object: "webhook",
  ...view,
  rate_limit: view.rate_limit ?? null,
});

export function targetOf(doc: WebhookDoc, nowMs = Date.now()): Target {
  const now = new Date(nowMs).toISOString();
  // The newest rotated-out secret only: a document may hold more, but a delivery carries at most two signatures.
  const previous = doc.previous_secrets.filter((p) => p.expires_at > now).slice(0, SIGNING_SECRETS_MAX - 1);
  const secrets = [doc.secret, ...previous.map((p) => p.secret)];
  const { id, org_id, environment, url, events, status, consecutive_failures } = doc;
  return { id, org_id, environment, url, events, status, secrets, consecutive_failures, rate_limit: doc.rate_limit ?? null };
}

/**
 * The subscription list, checked: `["*"]` alone, or event type names. A name in a system namespace
 * (`workflow.*`, `api_key.*`, …) must be one the platform emits; custom names need only the shape.
 */
export function checkSubscription(events: string[]): string[] {
  const unique = [...new Set(events)];
  if (unique.includes("*")) {
    if (unique.length > 1) throw invalidParam("events", "'*' subscribes to every event and cannot be combined with other types");
    return unique;
  }
  for (const type of unique) {
    if (!EVENT_TYPE_PATTERN.test(type)) {
      throw invalidParam("events", `'${type}' is not an event type: use lower-case dotted names such as 'order.created', or '*'`);
    }
    if (isReservedType(type) && !isSystemType(type)) {
      throw invalidParam("events", `Unknown event type '${type}': GET /v1/events/types lists the system types`);
    }
  }
  return unique;
}

/** An ISO 8601 time with a zone (or a bare date, UTC), as ms since the epoch; else 400 naming `param`. */
export function timeOf(value: string, param: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(ms)) throw invalidParam(param, `${param} must be an ISO 8601 time with a zone, such as 2026-11-23T10:00:00Z`);
  return ms;
}

/** A test event's type and data: `requested` must be one the webhook subscribes to; by default its first type. */
export function testEventOf(
  subscribed: readonly string[],
  requested: string | undefined,
): { type: string; example?: Record<string, unknown> } {
  const type = requested ?? (subscribed[0] === "*" ? "webhook.test" : subscribed[0]);
  if (subscribed[0] !== "*" && !subscribed.includes(type)) {
    throw invalidParam("event_type", `The webhook does not subscribe to '${type}': it gets ${subscribed.join(", ")}`);
  }
  if (!EVENT_TYPE_PATTERN.test(type)) throw invalidParam("event_type", `'${type}' is not an event type`);
  return { type, ...(EVENT_EXAMPLES[type] && { example: EVENT_EXAMPLES[type] }) };
}

/** A test event's own data, held to an event's size limit (the gateway held it to the body's nesting and key limits). */
export function checkTestData(data: Record<string, unknown>): Record<string, unknown> {
  const size = Buffer.byteLength(JSON.stringify(data));
  if (size > TEST_DATA_MAX_BYTES) throw invalidParam("data", `data is ${size} bytes as JSON; the limit is ${TEST_DATA_MAX_BYTES}`);
  return data;
}
