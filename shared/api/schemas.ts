/**
 * The API's resources and the request rules the validators do not state, as JSON Schema (2020-12,
 * OpenAPI 3.1's dialect): the runtime half of shared/api/wire.ts. The TS types stay in wire.ts (the
 * services and the dashboard import them); these schemas cannot drift from them unnoticed because
 * every API test validates every answer it gets against the document built from them
 * (test/helpers/platform.ts), and `additionalProperties: false` makes a field the server adds and
 * the schema lacks a failure too. Object schemas carry a `title` (the generated client's names).
 * Each area's schemas are in schemas/; this file puts them together.
 */
import { SCOPE_NAMES } from "./scopes";
import { ANALYTICS_RESOURCES } from "./schemas/analytics";
import { anyObject, COMMON_RESOURCES, date, instant, type JsonSchema, ref, refOrNull, time, withSecret } from "./schemas/common";
import { CUSTOM_EVENT_TYPE, EVENT_RESOURCES, EVENT_TYPE } from "./schemas/events";
import { AUDIT_RESOURCES, ORG_RESOURCES } from "./schemas/orgs";
import { cancelOn, STEP_RESOURCES, steps } from "./schemas/steps";
import { RECOVERY_RESOURCES, subscription, WEBHOOK_RESOURCES, webhookUrl } from "./schemas/webhooks";
import { SCHEDULE_RESOURCES, SECRET_RESOURCES, TRIGGER_RESOURCES, WORKFLOW_RESOURCES } from "./schemas/workflows";
import { HOOK_RESOURCES } from "./schemas/hooks";
import { BULK_RESOURCES } from "./schemas/bulk";

export { EVENT_TYPE } from "./schemas/events";
export { idOf, REQUEST_ID, type JsonSchema } from "./schemas/common";
export { REQUEST_COMPONENTS } from "./schemas/steps";

/** The resources as the API answers them (wire.ts), by component name, in the order the API reference lists them. */
export const RESOURCES: Record<string, JsonSchema> = {
  ...ORG_RESOURCES,
  ...EVENT_RESOURCES,
  ...WEBHOOK_RESOURCES,
  ...TRIGGER_RESOURCES,
  ...HOOK_RESOURCES,
  ...STEP_RESOURCES,
  ...RECOVERY_RESOURCES,
  ...SECRET_RESOURCES,
  ...AUDIT_RESOURCES,
  ...WORKFLOW_RESOURCES,
  ...SCHEDULE_RESOURCES,
  ...BULK_RESOURCES,
  ...ANALYTICS_RESOURCES,
  ...COMMON_RESOURCES,
};
RESOURCES.NewApiKey = withSecret(
  RESOURCES.ApiKey,
  "NewApiKey",
  "key",
  "The key itself: in this answer only (null in an idempotent replay of it)",
);
RESOURCES.WorkflowWithSecret = withSecret(
  RESOURCES.Workflow,
  "WorkflowWithSecret",
  "signing_secret",
  "The secret that signs its http steps' requests: in this answer only (null in an idempotent replay of it)",
);
RESOURCES.DeliveryDetail = {
  ...RESOURCES.Delivery,
  title: "DeliveryDetail",
  properties: {
    ...(RESOURCES.Delivery.properties as Record<string, JsonSchema>),
    payload: {
      ...anyObject,
      type: ["object", "null"],
      description: "The JSON body every attempt sent; null once the event is no longer stored",
    },
  },
  required: [...(RESOURCES.Delivery.required as string[]), "payload"],
};
RESOURCES.TestDelivery = {
  ...RESOURCES.Delivery,
  title: "TestDelivery",
  required: [...(RESOURCES.Delivery.required as string[]), "test"],
};
RESOURCES.WebhookWithSecret = withSecret(
  RESOURCES.Webhook,
  "WebhookWithSecret",
  "secret",
  "The signing secret (`whsec_…`): in this answer only (null in an idempotent replay of it)",
);

/**
 * The rules an action checks in its logic rather than its params (to name the field at fault),
 * by action and field: they replace what the params' schema says of that field in the document.
 */
export const REQUEST_RULES: Record<string, Record<string, JsonSchema>> = {
  "workflows.create": {
    trigger: ref("Trigger"),
    concurrency: refOrNull("FlowConcurrency"),
    throttle: refOrNull("FlowThrottle"),
    debounce: refOrNull("FlowDebounce"),
    steps,
    cancel_on: cancelOn,
    output: {
      description: "Templates (CEL, as in steps) over every step, filled when a run succeeds: its runs' output. Null (PATCH) removes it",
    },
  },
  "workflows.validate": {
    trigger: ref("Trigger"),
    concurrency: refOrNull("FlowConcurrency"),
    throttle: refOrNull("FlowThrottle"),
    debounce: refOrNull("FlowDebounce"),
    steps,
    cancel_on: cancelOn,
    output: {
      description: "Templates (CEL, as in steps) over every step, filled when a run succeeds: its runs' output. Null (PATCH) removes it",
    },
  },
  "workflows.update": {
    trigger: ref("Trigger"),
    concurrency: refOrNull("FlowConcurrency"),
    throttle: refOrNull("FlowThrottle"),
    debounce: refOrNull("FlowDebounce"),
    steps,
    cancel_on: { ...cancelOn, type: ["array", "null"] },
    output: {
      description: "Templates (CEL, as in steps) over every step, filled when a run succeeds: its runs' output. Null (PATCH) removes it",
    },
  },
  "keys.create": {
    scopes: { type: "array", minItems: 1, maxItems: SCOPE_NAMES.length, items: ref("Scope"), description: "Scopes your own key holds" },
    expires_at: { ...time, maxLength: 40, description: "In the future, and no later than the calling key's own expiry" },
  },
  "events.emit": { type: CUSTOM_EVENT_TYPE, data: { ...anyObject, description: "At most 64 KiB as JSON", default: {} } },
  "webhooks.create": { url: webhookUrl, events: subscription },
  "webhooks.update": { url: webhookUrl, events: subscription },
  "webhooks.deliveries": { created_after: date, created_before: date },
  "webhooks.recover": { since: date, until: { ...date, description: "After since; absent: up to now" } },
  "webhooks.test": {
    event_type: { ...EVENT_TYPE, description: "One the webhook subscribes to (by default its first; `webhook.test` for `*`)" },
    data: { ...anyObject, description: "The event's data, sent as given; at most 64 KiB as JSON. Absent: the type's example" },
  },
  "workflows.listAllRuns": { created_after: instant, created_before: instant },
  "workflows.backfillSchedule": {
    from: instant,
    to: { ...instant, description: "After from and not after now; at most 100 ticks in [from, to)" },
  },
  "orgs.auditLog": { created_after: instant, created_before: instant },
  "workflows.createSecret": {
    name: { type: "string", pattern: "^[A-Za-z][A-Za-z0-9_]{0,63}$", description: "As in `{{secrets.NAME}}`", examples: ["STRIPE_KEY"] },
  },
  "analytics.usage": { from: date, to: date },
  "analytics.workflows": { from: date, to: date },
  "analytics.webhooks": { from: date, to: date },
};
