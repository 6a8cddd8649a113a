import type { ServiceSchema } from "moleculer";
import type { RouteDef } from "../services/gateway/routes";
import { ERROR_CODES } from "../shared/errors";
import { MAX_COUNTED } from "../shared/api/pagination";
import { QUOTAS } from "../shared/records/quotas";
import { idOf, REQUEST_COMPONENTS, REQUEST_ID, REQUEST_RULES, RESOURCES } from "../shared/api/schemas";
import { SCOPES } from "../shared/api/scopes";
import { API_VERSIONS, LATEST_VERSION, SERVICE_VERSION_PATTERN } from "../shared/api/versions";
import { matchRoute } from "../services/gateway/routes";
import { AUDIT_FILTERS } from "../services/orgs/orgs.logic";

/**
 * Query parameters of which a request may name one at most (each reads its own index): stated in
 * the operation's description and as `x-exclusive-query`, which the fuzz test honours.
 */
const EXCLUSIVE_QUERY: Record<string, readonly string[]> = { "orgs.auditLog": AUDIT_FILTERS };

/**
 * The API reference (OpenAPI 3.1), made from the gateway's route table and each action's
 * fastest-validator schema, so it cannot drift from what the gateway routes and validates: a route
 * added to the table is in it, with the parameters its action accepts. What `data` holds and the
 * rules the actions check in their logic come from shared/api/schemas.ts (one definition, which every
 * API test checks live answers against).
 */
type Json = Record<string, unknown>;

/** A fastest-validator rule as JSON Schema (the rule kinds the services use). */
export function jsonSchemaOf(rule: unknown): Json {
  if (typeof rule === "string") return jsonSchemaOf({ type: rule.split("|")[0] });
  const r = rule as Json & { type?: string };
  const common: Json = {};
  if (r.default !== undefined) common.default = r.default;
  const orNull = (schema: Json): Json => (r.nullable && schema.type !== undefined ? { ...schema, type: [schema.type, "null"] } : schema);
  return orNull(ruleSchema(r, common));
}

function ruleSchema(r: Json & { type?: string }, common: Json): Json {
  switch (r.type) {
    case "string":
      return {
        type: "string",
        ...(r.min !== undefined && { minLength: r.min }),
        ...(r.max !== undefined && { maxLength: r.max }),
        // A trimmed string is measured after trimming: it needs something besides spaces.
        ...(r.pattern instanceof RegExp ? patternOf(r.pattern) : r.trim === true && r.min !== undefined ? { pattern: "\\S" } : {}),
        ...common,
      };
    case "email":
      return { type: "string", format: "email", ...(r.max !== undefined && { maxLength: r.max }), ...common };
    case "number":
      return {
        type: r.integer ? "integer" : "number",
        ...(r.min !== undefined && { minimum: r.min }),
        ...(r.max !== undefined && { maximum: r.max }),
        ...common,
      };
    case "boolean":
      return { type: "boolean", ...common };
    case "enum":
      return { type: "string", enum: r.nullable ? [...(r.values as unknown[]), null] : r.values, ...common };
    case "array":
      return {
        type: "array",
        items: r.items === undefined ? {} : jsonSchemaOf(r.items),
        ...(r.min !== undefined && { minItems: r.min }),
        ...(r.max !== undefined && { maxItems: r.max }),
        ...common,
      };
    case "object": {
      const props = (r.props ?? {}) as Json;
      return { type: "object", ...(r.props !== undefined ? objectOf(props) : { additionalProperties: true }), ...common };
    }
    default:
      return { ...common };
  }
}

/** A pattern, with an example when it is an id's (the document's examples must match their schemas). */
function patternOf(pattern: RegExp): Json {
  const id = /^\^(\w+)_\[0-9a-z\]\{26\}\$$/.exec(pattern.source);
  return id ? idOf(id[1]) : { pattern: pattern.source };
}

const isOptional = (rule: unknown): boolean =>
  typeof rule === "string" ? rule.includes("|optional") : Boolean((rule as Json).optional) || (rule as Json).default !== undefined;

function objectOf(props: Json): Json {
  const fields = Object.entries(props).filter(([name]) => !name.startsWith("$$"));
  const required = fields.filter(([, rule]) => !isOptional(rule)).map(([name]) => name);
  return {
    properties: Object.fromEntries(fields.map(([name, rule]) => [name, jsonSchemaOf(rule)])),
    ...(required.length > 0 && { required }),
    additionalProperties: props.$$strict ? false : true,
  };
}

const operationId = (route: RouteDef) => route.action.replace(/[.-](\w)/g, (_m, c: string) => c.toUpperCase());

/** A schema's actions with its mixins' (a service's own action wins over a mixin's of the same name, as in Moleculer). */
const actionsOf = (schema: Partial<ServiceSchema<any, any, any>>): Record<string, unknown> =>
  Object.assign({}, ...[...(schema.mixins ?? [])].reverse().map(actionsOf), schema.actions);

const TAGS: Record<string, { name: string; description: string }> = {
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
  listen: { name: "Listen", description: "The CLI's `listen --forward-to`: signed deliveries streamed to a developer's machine" },
};
const tagOf = (route: RouteDef) => TAGS[route.path.split("/")[1]].name;

const schemaRef = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const header = (name: string): Json => ({ $ref: `#/components/headers/${name}` });

/** The list parameters, the same on every list, and the analytics window's. */
const QUERY_DOCS: Record<string, string> = {
  page: `Offset paging: the page, from 1 (page × per_page ≤ ${MAX_COUNTED}). Offsets drift when items are added between reads; cursors do not`,
  per_page: "Offset paging: items per page. page and per_page cannot be sent with limit, starting_after or ending_before (400)",
  limit: "Cursor paging: items per page (with starting_after or ending_before, or alone for the first page)",
  starting_after: "Cursor paging: the last item you have (its id; an event type's `type`); answers the items after it, and meta.has_more",
  ending_before: "Cursor paging: the first item you have (its id; an event type's `type`); answers the items before it, and meta.has_more",
  from: "The window's start, an ISO 8601 date or time with a zone (from ≤ t < to); from must be before to (from after to, or equal, is a 400), and the window at most 90 days",
  to: "The window's end, an ISO 8601 date or time with a zone (from ≤ t < to); defaults to now; to must be after from",
};

/** Statuses every error answer may take, with what causes them (each answers the Error schema). */
const ERROR_STATUSES: Record<string, string> = {
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

/**
 * A value that satisfies `schema`: its first example, const, enum value or default, or one built from
 * its parts; the document's examples are made so, so they cannot disagree with the schemas.
 */
export function exampleOf(schema: Json | undefined, schemas: Record<string, Json>): unknown {
  if (schema === undefined) return {};
  if (typeof schema.$ref === "string") return exampleOf(schemas[schema.$ref.split("/").pop() as string], schemas);
  if (Array.isArray(schema.examples)) return schema.examples[0];
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  for (const key of ["oneOf", "anyOf"] as const) if (Array.isArray(schema[key])) return exampleOf((schema[key] as Json[])[0], schemas);
  const merged = Array.isArray(schema.allOf)
    ? Object.assign({}, ...(schema.allOf as Json[]).map((part) => exampleOf(part, schemas)))
    : undefined;
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === "object" || schema.properties || merged) {
    const props = (schema.properties ?? {}) as Record<string, Json>;
    const required = new Set((schema.required ?? []) as string[]);
    const own = Object.entries(props).filter(([name]) => required.has(name) || props[name].examples !== undefined);
    return { ...merged, ...Object.fromEntries(own.map(([name, prop]) => [name, exampleOf(prop, schemas)])) };
  }
  if (type === "array") {
    const n = Math.max(1, (schema.minItems as number | undefined) ?? 0);
    return Array.from({ length: n }, () => exampleOf(schema.items as Json, schemas));
  }
  if (type === "integer" || type === "number") return (schema.minimum as number | undefined) ?? 1;
  if (type === "boolean") return true;
  if (type === "string") {
    if (schema.format === "date-time") return "2026-11-23T10:00:00.000Z";
    if (schema.format === "email") return "ada@example.com";
    return "x".repeat(Math.max(1, (schema.minLength as number | undefined) ?? 1));
  }
  if (type === "null") return null;
  return {};
}

export function openApiDocument(routes: readonly RouteDef[], schemas: Partial<Record<string, ServiceSchema<any, any, any>>>): Json {
  const actions = new Map<string, Json>();
  for (const schema of Object.values(schemas)) {
    for (const [name, action] of Object.entries(schema ? actionsOf(schema) : {})) {
      const params = (action as { params?: Json } | undefined)?.params;
      if (params) actions.set(`${schema!.name}.${name}`, params);
    }
  }
  const components: Record<string, Json> = { ...RESOURCES, ...REQUEST_COMPONENTS, Error: ERROR_SCHEMA };
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const params = actions.get(route.action) ?? {};
    const rules = REQUEST_RULES[route.action] ?? {};
    const fieldSchema = (name: string, rule: unknown): Json => {
      const own = jsonSchemaOf(rule);
      const logic = rules[name];
      if (!logic) return own;
      // The params say whether null is accepted (and the default): the logic's rule says the rest.
      const orNull = Array.isArray(own.type) && own.type.includes("null") && typeof logic.type === "string";
      return { ...logic, ...(orNull && { type: [logic.type, "null"] }), ...(own.default !== undefined && { default: own.default }) };
    };
    const inPath = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const rest = Object.fromEntries(Object.entries(params).filter(([name]) => !inPath.includes(name)));
    const parameters: Json[] = inPath.map((name) => ({
      name,
      in: "path",
      required: true,
      description: name === "id" ? "The resource's id" : `The ${name.replace("_id", "")}'s id`,
      schema: jsonSchemaOf(params[name] ?? "string"),
    }));
    let requestBody: Json | undefined;
    if (route.method === "GET" || route.method === "DELETE") {
      for (const [name, rule] of Object.entries(rest)) {
        if (name.startsWith("$$")) continue;
        const description = QUERY_DOCS[name];
        parameters.push({
          name,
          in: "query",
          required: !isOptional(rule),
          ...(description && { description }),
          schema: fieldSchema(name, rule),
        });
      }
    } else if (Object.keys(rest).some((name) => !name.startsWith("$$"))) {
      const body = { type: "object", ...objectOf(rest) } as unknown as Json & { properties: Record<string, Json> };
      for (const [name, rule] of Object.entries(rest)) if (!name.startsWith("$$")) body.properties[name] = fieldSchema(name, rule);
      requestBody = {
        required: Object.entries(rest).some(([n, r]) => !n.startsWith("$$") && !isOptional(r)),
        content: { "application/json": { schema: body, example: exampleOf(body, components) } },
      };
    }
    parameters.push({ $ref: "#/components/parameters/ServiceVersion" });
    parameters.push({ $ref: "#/components/parameters/XRequestId" }, { $ref: "#/components/parameters/Traceparent" });
    if (route.method === "POST") parameters.push({ $ref: "#/components/parameters/IdempotencyKey" });
    const status = String(route.status ?? 200);
    const data = route.resource ? schemaRef(route.resource) : {};
    const okSchema: Json = route.list
      ? {
          type: "object",
          properties: { object: { type: "string", const: "list" }, data: { type: "array", items: data }, meta: schemaRef("ListMeta") },
          required: ["object", "data", "meta"],
          additionalProperties: false,
        }
      : { type: "object", properties: { data }, required: ["data"], additionalProperties: false };
    const location = route.status === 201 && matchRoute("GET", `${route.path.replace(/\{\w+\}/g, "x")}/x`).route !== undefined;
    const okHeaders: Json = {
      "Request-Id": header("RequestId"),
      "Service-Version": header("ServiceVersion"),
      "RateLimit-Limit": header("RateLimitLimit"),
      "RateLimit-Remaining": header("RateLimitRemaining"),
      "RateLimit-Reset": header("RateLimitReset"),
      ...(route.method === "POST" && { "Idempotent-Replayed": header("IdempotentReplayed") }),
      ...(location && { Location: header("Location") }),
      ...(route.secret && { "Secret-Redacted": header("SecretRedacted") }),
    };
    const errors = Object.keys(ERROR_STATUSES).filter(
      (code) =>
        (code !== "403" || route.scope !== null) &&
        (code !== "404" || inPath.length > 0) &&
        (code !== "409" || route.method !== "GET") &&
        (code !== "500" || Boolean(route.audit)),
    );
    paths[route.path] ??= {};
    paths[route.path][route.method.toLowerCase()] = {
      operationId: operationId(route),
      tags: [tagOf(route)],
      summary: `${route.method} ${route.path}`,
      description:
        (route.scope === null ? "Any valid key." : `Needs the \`${route.scope}\` scope.`) +
        (EXCLUSIVE_QUERY[route.action] ? ` Filter by one of ${EXCLUSIVE_QUERY[route.action].join(", ")} at a time.` : ""),
      ...(EXCLUSIVE_QUERY[route.action] && { "x-exclusive-query": [...EXCLUSIVE_QUERY[route.action]] }),
      security: [{ bearer: route.scope === null ? [] : [route.scope] }],
      parameters,
      ...(requestBody && { requestBody }),
      responses: {
        [status]: route.stream
          ? {
              description:
                "Server-Sent Events: `session` (id, secret, tenant, types) first, then one `delivery` (id, event_id, event_type, headers, body) per event",
              headers: { "Request-Id": header("RequestId") },
              content: { "text/event-stream": { schema: { type: "string" }, example: "event: session\ndata: {}\n\n" } },
            }
          : {
              description: route.status === 201 ? "Created" : route.status === 202 ? "Accepted: the work goes on in the background" : "OK",
              headers: okHeaders,
              content: { "application/json": { schema: okSchema, example: exampleOf(okSchema, components) } },
            },
        ...Object.fromEntries(errors.map((code) => [code, { $ref: `#/components/responses/E${code}` }])),
      },
    };
  }
  const usedTags = [...new Set(routes.map(tagOf))];
  return {
    openapi: "3.1.0",
    info: {
      title: "Workflow automation platform API",
      version: LATEST_VERSION,
      description:
        "Send `Authorization: Bearer <key>`; `Service-Version` pins the API version. A path that exists for other methods answers 405 with an `Allow` header listing them.",
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    },
    servers: [{ url: "/v1", description: "The API lives under /v1 of the server's address" }],
    tags: usedTags.map((name) => ({ name, description: Object.values(TAGS).find((t) => t.name === name)!.description })),
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: `API keys (svc_live_…, svc_test_…). Scopes: ${Object.keys(SCOPES).join(", ")}`,
        },
      },
      parameters: {
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
          description:
            "Your own id for the request (letters, digits, `.`, `_`, `-`; at most 128): answered as Request-Id and logged with it",
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
      },
      headers: {
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
          description: "On an idempotent replay: the field of `data` that held a secret shown once, now null",
          schema: { type: "string", enum: [...new Set(routes.flatMap((r) => (r.secret ? [r.secret] : [])))] },
        },
        Location: { description: "The created resource's URL", schema: { type: "string", format: "uri-reference" } },
      },
      responses: Object.fromEntries(
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
      ),
      schemas: components,
    },
  };
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

const ERROR_SCHEMA: Json = {
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
