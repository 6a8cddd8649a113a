import { EVENT_TYPE_MAX, RESERVED_PREFIXES, SYSTEM_EVENT_TYPES } from "../records/events";
import { SCOPE_NAMES } from "./scopes";
import { REQUEST_ID_PATTERN } from "../runtime/trace";
import { ATTEMPT_RESPONSE_LIMITS, DELIVERY_STATUSES, HTTP_METHODS, RECOVERY_STATUSES, RUN_STATUSES } from "./wire";

/**
 * The API's resources and the request rules the validators do not state, as JSON Schema (2020-12,
 * OpenAPI 3.1's dialect): the runtime half of shared/api/wire.ts. The TS types stay in wire.ts (the
 * services and the dashboard import them); these schemas cannot drift from them unnoticed because
 * every API test validates every answer it gets against the document built from them
 * (test/helpers/platform.ts), and `additionalProperties: false` makes a field the server adds and
 * the schema lacks a failure too. Object schemas carry a `title` (the generated client's names).
 */
export type JsonSchema = { [key: string]: unknown };

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const nullable = (schema: JsonSchema): JsonSchema => ({ ...schema, type: [schema.type as string, "null"] });
/** A component or null (3.1: a `$ref` takes no `type`, so null is the other branch). */
const refOrNull = (name: string): JsonSchema => ({ oneOf: [ref(name), { type: "null" }] });
/** A request's id (Request-Id, error bodies): ours (`req_…`) or the client's own X-Request-Id when well-formed. */
export const REQUEST_ID = { type: "string", pattern: REQUEST_ID_PATTERN.source, examples: ["req_01jdx3kq9v7c2m5n8p4r6t0w1y"] } as const;
const time = { type: "string", format: "date-time", examples: ["2026-11-23T10:00:00.000Z"] } as const;
/** An id: a prefix, `_` and a lower-case ULID (shared/ids.ts). */
export const idOf = (prefix: string): JsonSchema => ({
  type: "string",
  pattern: `^${prefix}_[0-9a-z]{26}$`,
  examples: [`${prefix}_01jdx3kq9v7c2m5n8p4r6t0w1y`],
});
const environment = { type: "string", enum: ["live", "test"] } as const;
/** Any JSON object (`additionalProperties: true` makes generated types `Record<string, unknown>`, not `{}`). */
const anyObject = { type: "object", additionalProperties: true } as const;

/** Lower-case dotted names (shared/records/events.ts EVENT_TYPE_PATTERN). */
export const EVENT_TYPE = {
  type: "string",
  pattern: "^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)+$",
  maxLength: EVENT_TYPE_MAX,
  examples: ["order.created"],
} as const;
/** What a client may emit, subscribe to or trigger on: a custom type, or (subscribe, trigger) a system type. */
const CUSTOM_EVENT_TYPE = {
  ...EVENT_TYPE,
  description: `A custom event type: not under the reserved prefixes ${RESERVED_PREFIXES.join(", ")}`,
  not: { pattern: `^(${RESERVED_PREFIXES.map((p) => p.replace(".", "\\.")).join("|")})` },
} as const;
/** An event trigger's type with `*` for one or two whole segments (`order.*`). */
const SEGMENT = "[a-z][a-z0-9_]*";
const EVENT_TYPE_PATTERN = {
  type: "string",
  pattern: `^(?:(?:${SEGMENT}\\.)*\\*(?:\\.${SEGMENT})*(?:\\.\\*)?(?:\\.${SEGMENT})*)$`,
  not: { pattern: "^\\*$" },
  maxLength: EVENT_TYPE_MAX,
  description: "An event type with `*` standing for one segment, at most twice",
  examples: ["order.*"],
};
const SUBSCRIBABLE_EVENT_TYPE = { anyOf: [CUSTOM_EVENT_TYPE, { type: "string", enum: Object.keys(SYSTEM_EVENT_TYPES) }] };

const object = (name: string, properties: Record<string, JsonSchema>, optional: string[] = [], description?: string): JsonSchema => ({
  type: "object",
  ...(description && { description }),
  properties,
  required: Object.keys(properties).filter((p) => !optional.includes(p)),
  additionalProperties: false,
  title: name,
});

const objectTag = (value: string): JsonSchema => ({ type: "string", const: value });

const headerMap = (description: string): JsonSchema => ({ type: "object", additionalProperties: { type: "string" }, description });

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

/** What every step may say besides its own fields (docs/workflows/language.md). */
const STEP_COMMON: Record<string, JsonSchema> = {
  if: { type: "string", maxLength: 2004, description: "A CEL condition (braces optional): false skips the step (`skipped`, output null)" },
  on_error: {
    type: "string",
    enum: ["fail", "continue"],
    default: "fail",
    description: "`continue`: a failure leaves the step `failed` with its error and the run goes on",
  },
};
const COMMON_KEYS = Object.keys(STEP_COMMON);
const RETRY_POLICY = object(
  "RetryPolicy",
  {
    max_attempts: { type: "integer", minimum: 1, maximum: 20 },
    initial_interval_ms: { type: "integer", minimum: 1, maximum: 3_600_000 },
    backoff_rate: { type: "number", minimum: 1, maximum: 10 },
    max_interval_ms: { type: "integer", minimum: 1, maximum: 3_600_000 },
    jitter: { type: "string", enum: ["full", "none"] },
    on: { type: "array", items: { type: "string", enum: ["timeout", "network", "5xx", "429", "408", "4xx"] } },
  },
  [],
  "When an http step's attempt is tried again; Retry-After is honoured up to max_interval_ms",
);

const httpStep = object(
  "HttpStep",
  {
    id: { type: "string" },
    type: { const: "http" },
    method: { type: "string", enum: [...HTTP_METHODS] },
    url: { type: "string" },
    headers: { type: "object", additionalProperties: { type: "string" } },
    body: {},
    timeout_ms: { type: "integer" },
    retries: { type: "integer" },
    retry: RETRY_POLICY,
    ...STEP_COMMON,
  },
  ["retry", ...COMMON_KEYS],
);

/** The resources as the API answers them (wire.ts), by component name. */
export const RESOURCES: Record<string, JsonSchema> = {
  Organization: object("Organization", {
    object: objectTag("organization"),
    id: idOf("org"),
    name: { type: "string" },
    api_version: { type: "string" },
    created_at: time,
    updated_at: time,
  }),
  Environment: object("Environment", {
    object: objectTag("environment"),
    org_id: idOf("org"),
    id: environment,
    name: { type: "string" },
    description: { type: "string" },
  }),
  Member: object("Member", {
    object: objectTag("member"),
    id: idOf("mem"),
    org_id: idOf("org"),
    email: { type: "string", format: "email" },
    role: { type: "string", enum: ["owner", "admin", "developer", "viewer"] },
    role_changed_by: { ...refOrNull("Actor"), description: "Who last changed the role (null: never changed)" },
    role_changed_at: nullable(time),
    created_at: time,
    updated_at: time,
  }),
  Identity: object("Identity", {
    object: objectTag("identity"),
    org: object("IdentityOrg", { id: idOf("org"), name: { type: "string" } }),
    environment,
    api_key: object("IdentityKey", {
      id: idOf("key"),
      name: { type: "string" },
      prefix: { type: "string" },
      last4: { type: "string" },
      scopes: { type: "array", items: ref("Scope") },
      expires_at: nullable(time),
    }),
  }),
  Scope: { type: "string", enum: [...SCOPE_NAMES] },
  ApiKey: object("ApiKey", {
    object: objectTag("api_key"),
    id: idOf("key"),
    name: { type: "string" },
    environment,
    scopes: { type: "array", items: ref("Scope") },
    status: { type: "string", enum: ["active", "revoked", "expired"] },
    prefix: { type: "string", pattern: "^svc_(live|test)_", examples: ["svc_live_a1b2"] },
    last4: { type: "string", minLength: 4, maxLength: 4 },
    created_at: time,
    revoked_at: nullable(time),
    revoked_by: { ...refOrNull("Actor"), description: "The key that revoked it (null: not revoked, or revoked before the audit trail)" },
    expires_at: nullable(time),
    last_used_at: nullable(time),
  }),
  Actor: object(
    "Actor",
    { key_id: idOf("key"), key_name: { type: ["string", "null"], description: "The key's name then" } },
    [],
    "Who did something through the API: the key it used",
  ),
  Event: object("Event", {
    object: objectTag("event"),
    id: idOf("evt"),
    environment,
    type: EVENT_TYPE,
    data: anyObject,
    source: { type: "string", description: "`api` for events clients emit, else the emitting service" },
    created_at: time,
  }),
  EventType: object(
    "EventType",
    {
      object: objectTag("event_type"),
      type: EVENT_TYPE,
      description: { type: ["string", "null"], description: "A system type's meaning; null for custom types" },
      system: { type: "boolean" },
      first_seen_at: { ...time, description: "Custom types: when this environment first emitted it" },
    },
    ["first_seen_at"],
  ),
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
  ManualTrigger: object("ManualTrigger", { type: { const: "manual" } }),
  EventTrigger: object(
    "EventTrigger",
    {
      type: { const: "event" },
      event_type: {
        anyOf: [SUBSCRIBABLE_EVENT_TYPE, EVENT_TYPE_PATTERN],
      },
      filter: {
        type: "string",
        maxLength: 2004,
        description: "A CEL condition over `event` (braces optional): only events it passes start a run",
      },
    },
    ["filter"],
  ),
  Trigger: {
    oneOf: [ref("ManualTrigger"), ref("EventTrigger")],
    discriminator: {
      propertyName: "type",
      mapping: { manual: "#/components/schemas/ManualTrigger", event: "#/components/schemas/EventTrigger" },
    },
  },
  HttpStep: httpStep,
  DelayStep: object(
    "DelayStep",
    { id: { type: "string" }, type: { const: "delay" }, duration_ms: { type: "integer" }, ...STEP_COMMON },
    COMMON_KEYS,
  ),
  ApprovalStep: object(
    "ApprovalStep",
    {
      id: { type: "string" },
      type: { const: "approval" },
      message: { type: ["string", "null"] },
      timeout_ms: { type: "integer" },
      ...STEP_COMMON,
    },
    ["timeout_ms", ...COMMON_KEYS],
  ),
  EmitStep: object(
    "EmitStep",
    { id: { type: "string" }, type: { const: "emit" }, event_type: EVENT_TYPE, data: anyObject, ...STEP_COMMON },
    COMMON_KEYS,
  ),
  StopStep: object(
    "StopStep",
    {
      id: { type: "string" },
      type: { const: "stop" },
      status: { type: "string", enum: ["succeeded", "failed"] },
      message: { type: ["string", "null"] },
      if: STEP_COMMON.if,
    },
    ["if"],
  ),
  SetStep: object("SetStep", { id: { type: "string" }, type: { const: "set" }, output: {}, ...STEP_COMMON }, COMMON_KEYS),
  Step: {
    oneOf: [ref("HttpStep"), ref("DelayStep"), ref("ApprovalStep"), ref("EmitStep"), ref("StopStep"), ref("SetStep")],
    discriminator: {
      propertyName: "type",
      mapping: {
        http: "#/components/schemas/HttpStep",
        delay: "#/components/schemas/DelayStep",
        approval: "#/components/schemas/ApprovalStep",
        emit: "#/components/schemas/EmitStep",
        stop: "#/components/schemas/StopStep",
        set: "#/components/schemas/SetStep",
      },
    },
  },
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
  Secret: object(
    "Secret",
    {
      object: objectTag("secret"),
      name: { type: "string", pattern: "^[A-Za-z][A-Za-z0-9_]{0,63}$", examples: ["STRIPE_KEY"] },
      environment,
      key_id: { type: "string", description: "The SECRETS_KEYS key that encrypts it" },
      created_at: time,
      updated_at: time,
    },
    [],
    "A secret as the API shows it: never its value",
  ),
  AuditEntry: object(
    "AuditEntry",
    {
      object: objectTag("audit_entry"),
      id: idOf("aud"),
      environment: { ...environment, description: "The environment of the key that made the change" },
      actor: ref("Actor"),
      action: {
        type: "string",
        pattern: "^[a-z_]+\\.[a-z_]+$",
        examples: ["webhook.created"],
        description: "What was done: `<resource>.<verb>`",
      },
      method: { type: "string", enum: ["POST", "PATCH", "DELETE"] },
      route: { type: "string", examples: ["POST /webhooks/{id}/rotate-secret"], description: "The operation: method and path template" },
      resource: object("AuditResource", { type: { type: "string" }, id: { type: ["string", "null"] } }),
      request_id: REQUEST_ID,
      client_address: {
        type: "string",
        description: "The client's address as the gateway saw it (X-Forwarded-For's last with TRUST_PROXY)",
      },
      status: {
        type: "integer",
        minimum: 200,
        maximum: 599,
        description: "The status answered: 2xx, or 401 for a key that revoked itself",
      },
      created_at: time,
    },
    [],
    "One successful mutation made through the API: who, what, to which resource, from where and when",
  ),
  Workflow: object(
    "Workflow",
    {
      object: objectTag("workflow"),
      id: idOf("wf"),
      environment,
      name: { type: "string" },
      description: { type: ["string", "null"] },
      status: { type: "string", enum: ["active", "inactive"] },
      trigger: ref("Trigger"),
      steps: { type: "array", items: ref("Step") },
      timeout_ms: {
        type: ["integer", "null"],
        description: "The most a run may take; a run over it fails with run_timed_out. Null: no limit",
      },
      version: { type: "integer", minimum: 1 },
      created_at: time,
      updated_at: time,
    },
    ["timeout_ms"],
  ),
  RunStep: object(
    "RunStep",
    {
      id: { type: "string" },
      type: { type: "string", enum: ["http", "delay", "approval", "emit", "stop", "set"] },
      status: { type: "string", enum: ["pending", "running", "waiting", "succeeded", "failed", "cancelled", "skipped"] },
      output: {},
      error: { type: ["string", "null"] },
      attempt_count: { type: "integer", minimum: 0, description: "How many times the step was tried" },
      started_at: nullable(time),
      finished_at: nullable(time),
      message: { type: ["string", "null"], description: "Approval steps, once reached: the message with its templates filled" },
      decision: { ...refOrNull("ApprovalDecision"), description: "Approval steps, once decided" },
      timeout_at: { ...nullable(time), description: "Approval steps with a timeout_ms, while they wait: when they time out" },
      attempts: {
        type: "array",
        maxItems: 10,
        description: "http steps: the newest attempts (at most 10), each with why it failed",
        items: object(
          "StepAttempt",
          {
            attempt: { type: "integer", minimum: 1 },
            started_at: time,
            finished_at: time,
            status_code: { type: "integer" },
            error: { type: ["string", "null"] },
          },
          ["status_code"],
        ),
      },
      error_code: {
        type: ["string", "null"],
        description: "Failed steps: the kind of failure (`step_failed`, `template_error`, `timed_out`, `stopped`, `rejected`)",
      },
    },
    ["message", "decision", "timeout_at", "attempts", "error_code"],
  ),
  ApprovalDecision: object("ApprovalDecision", {
    decision: { type: "string", enum: ["approved", "rejected"] },
    comment: { type: ["string", "null"] },
    decided_by: ref("Actor"),
    decided_at: time,
  }),
  Run: object(
    "Run",
    {
      object: objectTag("run"),
      id: idOf("run"),
      environment,
      workflow_id: idOf("wf"),
      workflow_version: { type: "integer", minimum: 1 },
      status: { type: "string", enum: [...RUN_STATUSES] },
      input: anyObject,
      steps: { type: "array", items: ref("RunStep") },
      trigger: {
        oneOf: [
          object("ManualRunTrigger", { type: { const: "manual" } }),
          object("EventRunTrigger", { type: { const: "event" }, event_id: idOf("evt"), event_type: EVENT_TYPE }),
        ],
      },
      attempt: { type: "integer", minimum: 1, description: "1, and one more with every retry of the run" },
      rerun_of: { ...nullable(idOf("run")), description: "The run this one reruns, or null" },
      pending_approval: {
        oneOf: [
          object("PendingApproval", { step_id: { type: "string" }, message: { type: ["string", "null"] }, requested_at: time }),
          { type: "null" },
        ],
        description: "While the run waits for a person: what it asks; null otherwise",
      },
      cancelled_by: { ...refOrNull("Actor"), description: "Who cancelled it through the API" },
      cancel_reason: { type: ["string", "null"], enum: ["requested", "workflow_deleted", null] },
      stop_message: { type: ["string", "null"], description: "The message of the stop step that ended the run, or null" },
      created_at: time,
      updated_at: time,
      finished_at: nullable(time),
    },
    ["cancelled_by", "cancel_reason"],
  ),
  WorkflowDefinition: object("WorkflowDefinition", {
    object: objectTag("workflow_definition"),
    name: { type: "string" },
    description: { type: ["string", "null"] },
    status: { type: "string", enum: ["active", "inactive"] },
    trigger: ref("Trigger"),
    steps: { type: "array", items: ref("Step") },
    timeout_ms: { type: ["integer", "null"] },
  }),
  WorkflowVersion: object(
    "WorkflowVersion",
    {
      object: objectTag("workflow_version"),
      workflow_id: idOf("wf"),
      version: { type: "integer", minimum: 1 },
      name: { type: "string" },
      description: { type: ["string", "null"] },
      status: { type: "string", enum: ["active", "inactive"] },
      trigger: ref("Trigger"),
      steps: { type: "array", items: ref("Step") },
      timeout_ms: { type: ["integer", "null"] },
      created_at: time,
      created_by: { ...refOrNull("Actor"), description: "The key whose write made this version (null: not known)" },
    },
    ["timeout_ms"],
  ),
  UsageReport: object("UsageReport", {
    object: objectTag("usage_report"),
    from: time,
    to: time,
    granularity: { type: "string", enum: ["hour", "day"] },
    group_by: { type: ["string", "null"], enum: ["route", "status", "key", null] },
    buckets: {
      type: "array",
      items: object(
        "UsageBucket",
        {
          start: time,
          route: { type: "string" },
          status: { type: "integer" },
          key_id: { type: "string" },
          count: { type: "integer", minimum: 0 },
          errors: { type: "integer", minimum: 0 },
          p50_ms: { type: ["number", "null"] },
          p95_ms: { type: ["number", "null"] },
        },
        ["route", "status", "key_id"],
      ),
    },
  }),
  Outcomes: {
    type: "object",
    properties: {
      total: { type: "integer", minimum: 0 },
      by_status: { type: "object", additionalProperties: { type: "integer" } },
      success_rate: { type: ["number", "null"] },
      attempt_counts: object("AttemptCounts", {
        total: { type: "integer" },
        succeeded: { type: "integer" },
        failed: { type: "integer" },
      }),
      delivery_success_rate: { type: ["number", "null"] },
    },
    required: ["total", "by_status", "success_rate"],
  },
  OutcomeReport: {
    allOf: [ref("Outcomes")],
    type: "object",
    properties: {
      object: objectTag("outcome_report"),
      from: time,
      to: time,
      workflows: { type: "array", items: { allOf: [ref("Outcomes")], properties: { workflow_id: idOf("wf") }, required: ["workflow_id"] } },
      webhooks: { type: "array", items: { allOf: [ref("Outcomes")], properties: { webhook_id: idOf("wh") }, required: ["webhook_id"] } },
    },
    required: ["object", "from", "to"],
  },
  ListMeta: {
    type: "object",
    description:
      "By page (`page`, `per_page`): total, page, per_page. By cursor (`starting_after`, `ending_before`, `limit`): total, limit, has_more. `total` counts up to 10,000; beyond, it is 10,000 and `total_capped` is true.",
    properties: {
      total: { type: "integer", minimum: 0 },
      total_capped: { const: true },
      page: { type: "integer", minimum: 1 },
      per_page: { type: "integer", minimum: 0 },
      limit: { type: "integer", minimum: 1 },
      has_more: { type: "boolean" },
    },
    required: ["total"],
    additionalProperties: false,
  },
};

/** `base` with more fields, all required: the answers that show a secret once. */
function withSecret(base: JsonSchema, name: string, field: string, description: string): JsonSchema {
  // null in an idempotent replay of the answer: the secret is never stored (header Secret-Redacted).
  const properties = { ...(base.properties as Record<string, JsonSchema>), [field]: { type: ["string", "null"], description } };
  return { ...base, title: name, properties, required: [...(base.required as string[]), field] };
}
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

const STEP_ID = { type: "string", pattern: "^[a-z][a-z0-9_]{0,49}$", description: "Defaults to step_<n> (its position from 1)" };
const TEMPLATES =
  "Strings may hold templates: `{{ <CEL expression> }}` over `input`, `steps.<earlier step id>` (`output`, `status`, `error`), `run` and `workflow`, checked when written (docs/workflows/language.md); `{{secrets.NAME}}` in http steps only.";

/** What a client writes as a step: the rules checkSteps (services/workflows/workflows.logic.ts) enforces. */
const stepInputs: Record<string, JsonSchema> = {
  HttpStepInput: object(
    "HttpStepInput",
    {
      id: STEP_ID,
      type: { const: "http" },
      method: { type: "string", enum: [...HTTP_METHODS], default: "POST" },
      url: {
        type: "string",
        minLength: 1,
        maxLength: 2048,
        description: `An absolute https URL to a public address (http in the test environment), or one with templates, checked when the run resolves it. ${TEMPLATES}`,
        examples: ["https://example.com/hooks/orders"],
      },
      headers: {
        type: "object",
        maxProperties: 50,
        propertyNames: { pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" },
        additionalProperties: { type: "string" },
        default: {},
      },
      body: { description: `Any JSON value, at most 64 KiB as JSON. ${TEMPLATES}` },
      timeout_ms: { type: "integer", minimum: 1, maximum: 60_000, default: 10_000 },
      retries: { type: "integer", minimum: 0, maximum: 10, default: 0 },
      retry: RETRY_POLICY,
      ...STEP_COMMON,
    },
    ["id", "method", "headers", "body", "timeout_ms", "retries", "retry", ...COMMON_KEYS],
  ),
  DelayStepInput: object(
    "DelayStepInput",
    {
      id: STEP_ID,
      type: { const: "delay" },
      duration_ms: { type: "integer", minimum: 1, maximum: 30 * 24 * 60 * 60 * 1000 },
      ...STEP_COMMON,
    },
    ["id", ...COMMON_KEYS],
  ),
  ApprovalStepInput: object(
    "ApprovalStepInput",
    {
      id: STEP_ID,
      type: { const: "approval" },
      message: { type: ["string", "null"], maxLength: 1000 },
      timeout_ms: {
        type: "integer",
        minimum: 1,
        maximum: 30 * 24 * 60 * 60 * 1000,
        description: "No decision within this: the step fails with timed_out",
      },
      ...STEP_COMMON,
    },
    ["id", "message", "timeout_ms", ...COMMON_KEYS],
  ),
  EmitStepInput: object(
    "EmitStepInput",
    { id: STEP_ID, type: { const: "emit" }, event_type: CUSTOM_EVENT_TYPE, data: { ...anyObject, default: {} }, ...STEP_COMMON },
    ["id", "data", ...COMMON_KEYS],
  ),
  StopStepInput: object(
    "StopStepInput",
    {
      id: STEP_ID,
      type: { const: "stop" },
      status: { type: "string", enum: ["succeeded", "failed"] },
      message: { type: ["string", "null"], maxLength: 1000, description: `Kept as the run's stop_message. ${TEMPLATES}` },
      if: STEP_COMMON.if,
    },
    ["id", "message", "if"],
  ),
  SetStepInput: object(
    "SetStepInput",
    {
      id: STEP_ID,
      type: { const: "set" },
      output: { description: `Any JSON value, at most 64 KiB as JSON: the step's output, its templates filled. ${TEMPLATES}` },
      ...STEP_COMMON,
    },
    ["id", ...COMMON_KEYS],
  ),
};

/** Request-side components: the step inputs, discriminated by `type`. */
export const REQUEST_COMPONENTS: Record<string, JsonSchema> = {
  ...stepInputs,
  StepInput: {
    oneOf: Object.keys(stepInputs).map(ref),
    discriminator: {
      propertyName: "type",
      mapping: Object.fromEntries(
        Object.keys(stepInputs).map((name) => [name.replace("StepInput", "").toLowerCase(), `#/components/schemas/${name}`]),
      ),
    },
  },
};

const date = {
  type: "string",
  pattern: "^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,3})?)?(Z|[+-]\\d{2}:\\d{2}))?$",
  description: "An ISO 8601 date (UTC) or a time with a zone",
  examples: ["2026-11-23T10:00:00Z"],
};
/** A time (GET /runs' range): a date, `T` and a time, as Date.parse reads it. */
const instant = {
  type: "string",
  maxLength: 64,
  pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,3})?)?(Z|[+-]\\d{2}:\\d{2})?$",
  description: "An ISO 8601 time, e.g. 2026-01-31T12:00:00Z",
  examples: ["2026-01-31T12:00:00Z"],
};
const steps = { type: "array", minItems: 1, maxItems: 50, items: ref("StepInput"), description: "At most 256 KiB as JSON in all" };
const webhookUrl = {
  type: "string",
  format: "uri",
  minLength: 1,
  maxLength: 2048,
  pattern: "^https?://",
  description: "An https URL whose host resolves to public addresses only (http is accepted in the test environment)",
  examples: ["https://example.com/webhooks"],
};
const subscription = {
  anyOf: [
    { type: "array", minItems: 1, items: { const: "*" }, description: "Every event" },
    { type: "array", minItems: 1, maxItems: 100, items: SUBSCRIBABLE_EVENT_TYPE },
  ],
  description: 'Event types, or `["*"]` for every event (`*` cannot be combined with types)',
  examples: [["order.created"]],
};

/**
 * The rules an action checks in its logic rather than its params (to name the field at fault),
 * by action and field: they replace what the params' schema says of that field in the document.
 */
export const REQUEST_RULES: Record<string, Record<string, JsonSchema>> = {
  "workflows.create": { trigger: ref("Trigger"), steps },
  "workflows.validate": { trigger: ref("Trigger"), steps },
  "workflows.update": { trigger: ref("Trigger"), steps },
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
  "orgs.auditLog": { created_after: instant, created_before: instant },
  "workflows.createSecret": {
    name: { type: "string", pattern: "^[A-Za-z][A-Za-z0-9_]{0,63}$", description: "As in `{{secrets.NAME}}`", examples: ["STRIPE_KEY"] },
  },
  "analytics.usage": { from: date, to: date },
  "analytics.workflows": { from: date, to: date },
  "analytics.webhooks": { from: date, to: date },
};
