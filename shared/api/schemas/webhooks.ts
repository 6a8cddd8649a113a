/** Webhooks, their deliveries, attempts and recoveries, and the rules of their URLs and subscriptions. */
import { ATTEMPT_RESPONSE_LIMITS, DELIVERY_STATUSES, RECOVERY_STATUSES } from "../wire";
import { environment, headerMap, idOf, type JsonSchema, nullable, object, objectTag, ref, time } from "./common";
import { EVENT_TYPE, SUBSCRIBABLE_EVENT_TYPE } from "./events";

const attempt = object(
  "Attempt",
  {
    number: { type: "integer", minimum: 1 },
    at: time,
    status_code: { type: ["integer", "null"] },
    duration_ms: { type: "number", minimum: 0 },
    error: { type: ["string", "null"] },
    request: object(
      "AttemptRequest",
      {
        method: { type: "string", const: "POST" },
        url: { type: "string" },
        headers: headerMap("The headers sent, without the signatures (secret-derived)"),
        body_bytes: { type: "integer", minimum: 0, description: "The body's length in bytes (the body is the delivery's `payload`)" },
      },
      [],
      "What the attempt sent: absent in lists, on attempts made before they were recorded and on attempts that sent nothing",
    ),
    response: object(
      "AttemptResponse",
      {
        headers: {
          ...headerMap("The receiver's headers, bounded"),
          maxProperties: ATTEMPT_RESPONSE_LIMITS.headers,
          propertyNames: { maxLength: ATTEMPT_RESPONSE_LIMITS.headerNameChars },
        },
        headers_omitted: { type: "integer", minimum: 1, description: "Headers left out (past the count or size bound)" },
        body: {
          type: "string",
          description: `The first ${ATTEMPT_RESPONSE_LIMITS.bodyBytes} bytes of the body: UTF-8 text, or base64 when \`body_encoding\` says so`,
        },
        body_encoding: { type: "string", enum: ["utf8", "base64"] },
        body_bytes: { type: "integer", minimum: 0, description: "The whole body's length in bytes as far as it was read" },
        body_truncated: { type: "boolean" },
      },
      ["headers_omitted"],
      "What the receiver answered: absent when nothing answered, and in lists",
    ),
    response_excerpt: { type: "string", description: "The start of the local answer's body (listener attempts)" },
  },
  ["request", "response", "response_excerpt"],
);

/** Webhooks, their health, deliveries and attempts. */
export const WEBHOOK_RESOURCES: Record<string, JsonSchema> = {
  Webhook: object(
    "Webhook",
    {
      object: objectTag("webhook"),
      id: idOf("wh"),
      environment,
      url: { type: "string", format: "uri", examples: ["https://example.com/webhooks"] },
      events: { type: "array", items: { type: "string" } },
      description: { type: ["string", "null"] },
      status: { type: "string", enum: ["enabled", "disabled"] },
      disabled_reason: { type: ["string", "null"] },
      consecutive_failures: { type: "integer", minimum: 0 },
      rate_limit: { type: ["integer", "null"], minimum: 1, description: "Deliveries per second at most; null: unlimited" },
      created_at: time,
      updated_at: time,
      health: ref("WebhookHealth"),
    },
    ["health"],
  ),
  WebhookHealth: object(
    "WebhookHealth",
    {
      last_attempt: {
        oneOf: [object("LastAttempt", { at: time, status_code: { type: ["integer", "null"] }, ok: { type: "boolean" } }), { type: "null" }],
        description: "The last attempt that got an answer or failed (status_code null: no answer); null before any",
      },
      consecutive_failed_attempts: { type: "integer", minimum: 0 },
      attempts_24h: object("Attempts24h", {
        total: { type: "integer", minimum: 0 },
        succeeded: { type: "integer", minimum: 0 },
        failed: { type: "integer", minimum: 0 },
      }),
      success_rate_24h: { type: ["number", "null"], minimum: 0, maximum: 1 },
    },
    [],
    "GET /webhooks and GET /webhooks/{id} only: how its attempts are going, from counters kept as attempts end",
  ),
  Attempt: attempt,
  Delivery: object(
    "Delivery",
    {
      object: objectTag("delivery"),
      id: idOf("del"),
      environment,
      webhook_id: { type: "string" },
      event_id: idOf("evt"),
      event_type: EVENT_TYPE,
      status: { type: "string", enum: [...DELIVERY_STATUSES] },
      attempts: { type: "array", items: ref("Attempt") },
      next_attempt_at: nullable(time),
      created_at: time,
      updated_at: time,
      test: { const: true, description: "A test event sent by POST /webhooks/{id}/test (not in the event log)" },
    },
    ["test"],
  ),
};

/** Jobs redelivering failed deliveries. */
export const RECOVERY_RESOURCES: Record<string, JsonSchema> = {
  Recovery: object(
    "Recovery",
    {
      object: objectTag("recovery"),
      id: idOf("rcv"),
      environment,
      webhook_id: idOf("wh"),
      status: { type: "string", enum: [...RECOVERY_STATUSES] },
      since: time,
      until: nullable(time),
      total: { type: "integer", minimum: 0, description: "Failed deliveries in the range when the job started (up to 10,000)" },
      total_capped: { const: true },
      done: { type: "integer", minimum: 0, description: "Deliveries redelivered so far" },
      created_at: time,
      updated_at: time,
      finished_at: nullable(time),
    },
    ["total_capped"],
    "A background job redelivering a webhook's failed deliveries created in [since, until)",
  ),
};

export const webhookUrl = {
  type: "string",
  format: "uri",
  minLength: 1,
  maxLength: 2048,
  pattern: "^https?://",
  description: "An https URL whose host resolves to public addresses only (http is accepted in the test environment)",
  examples: ["https://example.com/webhooks"],
};
export const subscription = {
  anyOf: [
    { type: "array", minItems: 1, items: { const: "*" }, description: "Every event" },
    { type: "array", minItems: 1, maxItems: 100, items: SUBSCRIBABLE_EVENT_TYPE },
  ],
  description: 'Event types, or `["*"]` for every event (`*` cannot be combined with types)',
  examples: [["order.created"]],
};
