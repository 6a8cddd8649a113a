/**
 * The API reference's fixed parts: tags, the words for shared query parameters and error statuses,
 * and the components every operation points at (header parameters, answer headers, error answers).
 */
import type { RouteDef } from "../services/gateway/routes";
import { ERROR_CODES } from "../shared/errors";
import { MAX_COUNTED } from "../shared/api/pagination";
import { QUOTAS } from "../shared/records/quotas";
import { REQUEST_ID } from "../shared/api/schemas";
import { API_VERSIONS, LATEST_VERSION, SERVICE_VERSION_PATTERN } from "../shared/api/versions";
import { AUDIT_FILTERS } from "../services/orgs/orgs.logic";
import type { Json } from "./openapi-rules";

/**
 * Query parameters of which a request may name one at most (each reads its own index): stated in
 * the operation's description and as `x-exclusive-query`, which the fuzz test honours.
 */
export const EXCLUSIVE_QUERY: Record<string, readonly string[]> = { "orgs.auditLog": AUDIT_FILTERS };
/**
 * Query parameters an operation takes only with another (the parameter: the one it needs), else a
 * 400 naming it: stated in the parameter's description and as `x-requires-query`, which the fuzz test honours.
 */
export const REQUIRES_QUERY: Record<string, Record<string, string>> = { "workflows.listAllRuns": { step_id: "parent_run_id" } };
/** The words for one operation's own query parameters. */
export const OPERATION_QUERY_DOCS: Record<string, Record<string, string>> = {
  "workflows.listAllRuns": {
    parent_run_id: "A run's child runs (those its run_workflow, map and parallel steps started), newest first",
    step_id:
      "Only with parent_run_id (else 400): the children of that run's step, in item order instead of newest first: `parent.index` ascending (a map's items #0, #1, …; a parallel's branches as written), each item's newest run first (a retried step runs an item again)",
  },
};
export const TAGS: Record<string, { name: string; description: string }> = {
  me: { name: "Organizations", description: "Who a key is, organizations, their members and environments" },
  orgs: { name: "Organizations", description: "Who a key is, organizations, their members and environments" },
  "api-keys": { name: "API keys", description: "Keys, their scopes and environments" },
  events: { name: "Events", description: "The event log and its type catalogue" },
  workflows: { name: "Workflows", description: "Workflow definitions, their versions and their runs" },
  runs: { name: "Workflows", description: "Workflow definitions, their versions and their runs" },
  secrets: { name: "Secrets", description: "Encrypted values http steps send as `{{secrets.NAME}}`; never shown again" },
  "audit-log": { name: "Audit log", description: "Who changed what in the organization, from where and when" },
  analytics: { name: "Analytics", description: "Usage and outcome counters by window" },
  webhooks: { name: "Webhooks", description: "Webhook endpoints and their delivery log" },
  hooks: {
    name: "Inbound webhooks",
    description: "POST /hooks/{hook_id}: a provider's signed request starts a workflow's run, without an API key",
  },
  listen: { name: "Listen", description: "The CLI's `listen --forward-to`: signed deliveries streamed to a developer's machine" },
};
export const tagOf = (route: RouteDef) => TAGS[route.path.split("/")[1]].name;

export const schemaRef = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
export const header = (name: string): Json => ({ $ref: `#/components/headers/${name}` });

/** The list parameters, the same on every list, and the analytics window's. */
export const QUERY_DOCS: Record<string, string> = {
  page: `Offset paging: the page, from 1 (page × per_page ≤ ${MAX_COUNTED}). Offsets drift when items are added between reads; cursors do not`,
  per_page: "Offset paging: items per page. page and per_page cannot be sent with limit, starting_after or ending_before (400)",
  limit: "Cursor paging: items per page (with starting_after or ending_before, or alone for the first page)",
  starting_after: "Cursor paging: the last item you have (its id; an event type's `type`); answers the items after it, and meta.has_more",
  ending_before: "Cursor paging: the first item you have (its id; an event type's `type`); answers the items before it, and meta.has_more",
  from: "The window's start, an ISO 8601 date or time with a zone (from ≤ t < to); from must be before to (from after to, or equal, is a 400), and the window at most 90 days",
  to: "The window's end, an ISO 8601 date or time with a zone (from ≤ t < to); defaults to now; to must be after from",
};

/** Statuses every error answer may take, with what causes them (each answers the Error schema). */
export const ERROR_STATUSES: Record<string, string> = {
  "400": `Invalid parameters, body or Service-Version, or a count quota reached (\`quota_exceeded\`: ${QUOTAS.webhooks_per_environment} webhooks, ${QUOTAS.active_api_keys_per_environment} active keys, ${QUOTAS.workflows_per_environment} workflows per environment)`,
  "401": "No key, or an unknown, revoked or expired one",
  "403": "The key lacks the operation's scope",
  "404": "No such resource in the key's environment",
  "409": "An Idempotency-Key reused with another request or still in flight, or the resource's state forbids it",
  "413": "The body is over 1 MiB",
  "415": "A body that is not `application/json`",
  "429": "Over the key's, organization's or address's request budget: wait Retry-After seconds",
  "408": "The body did not arrive in time (HTTP_BODY_TIMEOUT_MS); the connection is closed",
  "503": "The platform cannot serve it now (a service or the store is unreachable): retry after Retry-After seconds",
  "500":
    "Audited changes only: the change was applied but its audit log entry could not be stored (a success is never answered without it); with an Idempotency-Key, a retry answers the change's stored success",
};

/** The header parameters operations point at. */
export const PARAMETER_COMPONENTS: Json = {
  ServiceVersion: {
    name: "Service-Version",
    in: "header",
    required: false,
    description: `The API version to answer under: a calendar date as YYYY-MM-DD, on or after ${API_VERSIONS[0]} (the latest version on or before it answers); defaults to the organization's pinned version`,
    schema: { type: "string", pattern: SERVICE_VERSION_PATTERN, examples: [LATEST_VERSION] },
  },
  IdempotencyKey: {
    name: "Idempotency-Key",
    in: "header",
    required: false,
    description: "Repeating a POST with the same key answers the first answer again (Idempotent-Replayed: true) for 24 hours",
    schema: { type: "string", minLength: 1, maxLength: 255, examples: ["order-1234-create"] },
  },
  XRequestId: {
    name: "X-Request-Id",
    in: "header",
    required: false,
    description: "Your own id for the request (letters, digits, `.`, `_`, `-`; at most 128): answered as Request-Id and logged with it",
    schema: REQUEST_ID,
  },
  Traceparent: {
    name: "traceparent",
    in: "header",
    required: false,
    description: "A W3C trace context: what the request starts (deliveries, runs, their requests) carries it on as a child",
    schema: {
      type: "string",
      pattern: "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
      examples: ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    },
  },
};

/** What Secret-Redacted may say for a route's secret fields: those the answer held, in order (services/gateway/idempotency.ts). */
function redactions(fields: string | readonly string[]): string[] {
  const list = typeof fields === "string" ? [fields] : fields;
  const subsets: string[][] = [[]];
  for (const field of list) for (const s of [...subsets]) subsets.push([...s, field]);
  return subsets.filter((s) => s.length > 0).map((s) => s.join(", "));
}

/** The headers answers carry; `SecretRedacted` names the fields of the routes that show a secret once. */
export function headerComponents(routes: readonly RouteDef[]): Json {
  return {
    RequestId: {
      description: "The request's id, as in error bodies and log lines: the client's X-Request-Id when well-formed, else a new `req_…`",
      schema: REQUEST_ID,
    },
    ServiceVersion: { description: "The API version the answer follows", schema: { type: "string", enum: [...API_VERSIONS] } },
    RateLimitLimit: { description: "Requests the key may make per window", schema: { type: "integer" } },
    RateLimitRemaining: { description: "Requests left in this window", schema: { type: "integer" } },
    RateLimitReset: { description: "Seconds until the window resets", schema: { type: "integer" } },
    RetryAfter: { description: "Seconds to wait before retrying", schema: { type: "integer" } },
    IdempotentReplayed: {
      description: "`true` when this is the stored answer to an earlier request with the same Idempotency-Key",
      schema: { type: "string", enum: ["true"] },
    },
    SecretRedacted: {
      description: "On an idempotent replay: the fields of `data` that held a secret shown once, now null (comma-separated)",
      schema: { type: "string", enum: [...new Set(routes.flatMap((r) => (r.secret ? redactions(r.secret) : [])))] },
    },
    Location: { description: "The created resource's URL", schema: { type: "string", format: "uri-reference" } },
  };
}

/** One answer per error status, each with an example of the Error schema. */
export function errorResponses(): Json {
  return Object.fromEntries(
    Object.entries(ERROR_STATUSES).map(([code, description]) => [
      `E${code}`,
      {
        description,
        headers: {
          "Request-Id": header("RequestId"),
          ...((code === "429" || code === "503") && { "Retry-After": header("RetryAfter") }),
        },
        content: {
          "application/json": {
            schema: schemaRef("Error"),
            example: {
              error: {
                type: ERROR_CODES[EXAMPLE_CODES[code]].type,
                code: EXAMPLE_CODES[code],
                message: description,
                request_id: "req_01jdx3kq9v7c2m5n8p4r6t0w1y",
              },
            },
          },
        },
      },
    ]),
  );
}

const EXAMPLE_CODES: Record<string, keyof typeof ERROR_CODES> = {
  "400": "parameter_invalid",
  "401": "invalid_api_key",
  "403": "insufficient_scope",
  "404": "resource_not_found",
  "408": "request_timeout",
  "409": "idempotency_key_reused",
  "413": "payload_too_large",
  "415": "unsupported_media_type",
  "429": "rate_limited",
  "503": "service_unavailable",
  "500": "internal_error",
};

export const ERROR_SCHEMA: Json = {
  type: "object",
  properties: {
    error: {
      type: "object",
      properties: {
        type: { type: "string", enum: [...new Set(Object.values(ERROR_CODES).map((c) => c.type))] },
        code: { type: "string", enum: Object.keys(ERROR_CODES) },
        message: { type: "string" },
        param: { type: "string" },
        request_id: REQUEST_ID,
      },
      required: ["type", "code", "message", "request_id"],
      additionalProperties: false,
    },
  },
  required: ["error"],
  additionalProperties: false,
};
