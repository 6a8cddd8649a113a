import type { ServiceSchema } from "moleculer";
import type { RouteDef } from "../services/gateway/routes";
import { ERROR_CODES } from "../shared/errors";
import { MAX_COUNTED } from "../shared/pagination";
import { SCOPES } from "../shared/scopes";
import { LATEST_VERSION } from "../shared/versions";

/**
 * The API reference (OpenAPI 3.1), made from the gateway's route table and each action's
 * fastest-validator schema, so it cannot drift from what the gateway routes and validates: a route
 * added to the table is in it, with the parameters its action accepts.
 */
type Json = Record<string, unknown>;

/** A fastest-validator rule as JSON Schema (the rule kinds the services use). */
export function jsonSchemaOf(rule: unknown): Json {
  if (typeof rule === "string") return jsonSchemaOf({ type: rule.split("|")[0] });
  const r = rule as Json & { type?: string };
  const common: Json = {};
  if (r.default !== undefined) common.default = r.default;
  if (r.nullable) common.nullable = true;
  switch (r.type) {
    case "string":
      return {
        type: "string",
        ...(r.min !== undefined && { minLength: r.min }),
        ...(r.max !== undefined && { maxLength: r.max }),
        ...common,
      };
    case "email":
      return { type: "string", format: "email", ...common };
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
      return { type: "string", enum: r.values, ...common };
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
      return { type: "object", ...(r.props !== undefined && objectOf(props)), ...common };
    }
    default:
      return { ...common };
  }
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

export function openApiDocument(routes: readonly RouteDef[], schemas: Partial<Record<string, ServiceSchema<any, any, any>>>): Json {
  const actions = new Map<string, Json>();
  for (const schema of Object.values(schemas)) {
    for (const [name, action] of Object.entries(schema ? actionsOf(schema) : {})) {
      const params = (action as { params?: Json } | undefined)?.params;
      if (params) actions.set(`${schema!.name}.${name}`, params);
    }
  }
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const params = actions.get(route.action) ?? {};
    const inPath = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const rest = Object.fromEntries(Object.entries(params).filter(([name]) => !inPath.includes(name)));
    const parameters: Json[] = inPath.map((name) => ({ name, in: "path", required: true, schema: jsonSchemaOf(params[name] ?? "string") }));
    let requestBody: Json | undefined;
    if (route.method === "GET" || route.method === "DELETE") {
      for (const [name, rule] of Object.entries(rest)) {
        if (!name.startsWith("$$")) parameters.push({ name, in: "query", required: !isOptional(rule), schema: jsonSchemaOf(rule) });
      }
    } else if (Object.keys(rest).some((name) => !name.startsWith("$$"))) {
      requestBody = {
        required: Object.entries(rest).some(([n, r]) => !n.startsWith("$$") && !isOptional(r)),
        content: { "application/json": { schema: { type: "object", ...objectOf(rest) } } },
      };
    }
    const status = String(route.status ?? 200);
    paths[route.path] ??= {};
    paths[route.path][route.method.toLowerCase()] = {
      operationId: operationId(route),
      summary: `${route.method} ${route.path}`,
      description: route.scope === null ? "Any valid key." : `Needs the \`${route.scope}\` scope.`,
      security: [{ bearer: route.scope === null ? [] : [route.scope] }],
      ...(parameters.length > 0 && { parameters }),
      ...(requestBody && { requestBody }),
      responses: {
        [status]: route.stream
          ? {
              description:
                "Server-Sent Events: `session` (id, secret, tenant, types) first, then one `delivery` (id, event_id, event_type, headers, body) per event",
              content: { "text/event-stream": { schema: { type: "string" } } },
            }
          : {
              description: "OK",
              content: { "application/json": { schema: { $ref: route.list ? "#/components/schemas/List" : "#/components/schemas/Item" } } },
            },
        default: { description: "An error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Workflow automation platform API",
      version: LATEST_VERSION,
      description: "Send `Authorization: Bearer <key>`; `Service-Version` pins the API version.",
    },
    servers: [{ url: "/v1" }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: `API keys (svc_live_…, svc_test_…). Scopes: ${Object.keys(SCOPES).join(", ")}`,
        },
      },
      schemas: {
        Item: { type: "object", properties: { data: { type: "object" } }, required: ["data"] },
        List: {
          type: "object",
          properties: {
            data: { type: "array", items: { type: "object" } },
            meta: {
              type: "object",
              description: `By page: total, page, per_page. By cursor (starting_after, ending_before, limit): total, limit, has_more. total counts up to ${MAX_COUNTED}; beyond, it is ${MAX_COUNTED} and total_capped is true.`,
              properties: {
                total: { type: "integer" },
                total_capped: { type: "boolean" },
                page: { type: "integer" },
                per_page: { type: "integer" },
                limit: { type: "integer" },
                has_more: { type: "boolean" },
              },
            },
          },
          required: ["data", "meta"],
        },
        Error: {
          type: "object",
          properties: {
            error: {
              type: "object",
              properties: {
                type: { type: "string" },
                code: { type: "string", enum: Object.keys(ERROR_CODES) },
                message: { type: "string" },
                param: { type: "string" },
                request_id: { type: "string" },
              },
              required: ["type", "code", "message", "request_id"],
            },
          },
          required: ["error"],
        },
      },
    },
  };
}
