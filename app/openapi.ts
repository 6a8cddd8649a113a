import type { ServiceSchema } from "moleculer";
import type { RouteDef } from "../services/gateway/routes";
import { matchRoute } from "../services/gateway/routes";
import { REQUEST_COMPONENTS, REQUEST_RULES, RESOURCES } from "../shared/api/schemas";
import { SCOPES } from "../shared/api/scopes";
import { LATEST_VERSION } from "../shared/api/versions";
import {
  ERROR_SCHEMA,
  ERROR_STATUSES,
  errorResponses,
  EXCLUSIVE_QUERY,
  header,
  OPERATION_QUERY_DOCS,
  REQUIRES_QUERY,
  headerComponents,
  PARAMETER_COMPONENTS,
  QUERY_DOCS,
  schemaRef,
  TAGS,
  tagOf,
} from "./openapi-parts";
import { exampleOf, isOptional, jsonSchemaOf, objectOf, type Json } from "./openapi-rules";

export { exampleOf, jsonSchemaOf } from "./openapi-rules";

const operationId = (route: RouteDef) => route.action.replace(/[.-](\w)/g, (_m, c: string) => c.toUpperCase());

/** A schema's actions with its mixins' (a service's own action wins over a mixin's of the same name, as in Moleculer). */
const actionsOf = (schema: Partial<ServiceSchema<any, any, any>>): Record<string, unknown> =>
  Object.assign({}, ...[...(schema.mixins ?? [])].reverse().map(actionsOf), schema.actions);

/**
 * The API reference (OpenAPI 3.1), made from the gateway's route table and each action's
 * fastest-validator schema, so it cannot drift from what the gateway routes and validates: a route
 * added to the table is in it, with the parameters its action accepts. What `data` holds and the
 * rules the actions check in their logic come from shared/api/schemas.ts (one definition, which every
 * API test checks live answers against).
 */
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
    // An inbound hook's action takes the raw request the gateway hands it, not a JSON body of parameters.
    const rest = route.inbound ? {} : Object.fromEntries(Object.entries(params).filter(([name]) => !inPath.includes(name)));
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
        const description = OPERATION_QUERY_DOCS[route.action]?.[name] ?? QUERY_DOCS[name];
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
    if (route.inbound)
      requestBody = {
        required: false,
        description: "Whatever the provider sends (at most 64 KiB): verified as received, parsed for the run when it is JSON",
        content: {
          "application/json": { schema: { type: "object", additionalProperties: true }, example: { type: "invoice.paid" } },
          "text/plain": { schema: { type: "string" } },
          "application/x-www-form-urlencoded": { schema: { type: "object", additionalProperties: true } },
        },
      };
    parameters.push({ $ref: "#/components/parameters/ServiceVersion" });
    parameters.push({ $ref: "#/components/parameters/XRequestId" }, { $ref: "#/components/parameters/Traceparent" });
    if (route.method === "POST" && !route.inbound) parameters.push({ $ref: "#/components/parameters/IdempotencyKey" });
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
        (route.inbound
          ? "No API key: the hook's signature is checked against the body as sent (docs/inbound-webhooks.md). 202: a run started; 200: a duplicate (the first run) or a request the filter passed over."
          : route.scope === null
            ? "Any valid key."
            : `Needs the \`${route.scope}\` scope.`) +
        (EXCLUSIVE_QUERY[route.action] ? ` Filter by one of ${EXCLUSIVE_QUERY[route.action].join(", ")} at a time.` : ""),
      ...(EXCLUSIVE_QUERY[route.action] && { "x-exclusive-query": [...EXCLUSIVE_QUERY[route.action]] }),
      ...(REQUIRES_QUERY[route.action] && { "x-requires-query": { ...REQUIRES_QUERY[route.action] } }),
      security: route.inbound ? [] : [{ bearer: route.scope === null ? [] : [route.scope] }],
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
    // A duplicate or a request its filter passed over: answered 200 (no run started).
    if (route.inbound) {
      const responses = (paths[route.path] as Record<string, { responses: Record<string, Json> }>)[route.method.toLowerCase()].responses;
      responses["200"] = { ...responses[status], description: "A duplicate (the first run's id) or a request the filter passed over" };
    }
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
      parameters: PARAMETER_COMPONENTS,
      headers: headerComponents(routes),
      responses: errorResponses(),
      schemas: components,
    },
  };
}
