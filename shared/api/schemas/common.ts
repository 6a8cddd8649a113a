/** What the API's schemas are made of: references, ids, times, objects, and the list metadata. */
import { REQUEST_ID_PATTERN } from "../../runtime/trace";

export type JsonSchema = { [key: string]: unknown };

export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
export const nullable = (schema: JsonSchema): JsonSchema => ({ ...schema, type: [schema.type as string, "null"] });
/** A component or null (3.1: a `$ref` takes no `type`, so null is the other branch). */
export const refOrNull = (name: string): JsonSchema => ({ oneOf: [ref(name), { type: "null" }] });
/** A request's id (Request-Id, error bodies): ours (`req_…`) or the client's own X-Request-Id when well-formed. */
export const REQUEST_ID = { type: "string", pattern: REQUEST_ID_PATTERN.source, examples: ["req_01jdx3kq9v7c2m5n8p4r6t0w1y"] } as const;
export const time = { type: "string", format: "date-time", examples: ["2026-11-23T10:00:00.000Z"] } as const;
/** An id: a prefix, `_` and a lower-case ULID (shared/ids.ts). */
export const idOf = (prefix: string): JsonSchema => ({
  type: "string",
  pattern: `^${prefix}_[0-9a-z]{26}$`,
  examples: [`${prefix}_01jdx3kq9v7c2m5n8p4r6t0w1y`],
});
export const environment = { type: "string", enum: ["live", "test"] } as const;
/** Any JSON object (`additionalProperties: true` makes generated types `Record<string, unknown>`, not `{}`). */
export const anyObject = { type: "object", additionalProperties: true } as const;

export const object = (
  name: string,
  properties: Record<string, JsonSchema>,
  optional: string[] = [],
  description?: string,
): JsonSchema => ({
  type: "object",
  ...(description && { description }),
  properties,
  required: Object.keys(properties).filter((p) => !optional.includes(p)),
  additionalProperties: false,
  title: name,
});

export const objectTag = (value: string): JsonSchema => ({ type: "string", const: value });

export const headerMap = (description: string): JsonSchema => ({ type: "object", additionalProperties: { type: "string" }, description });

/** `base` with more fields, all required: the answers that show a secret once. */
export function withSecret(base: JsonSchema, name: string, field: string, description: string): JsonSchema {
  // null in an idempotent replay of the answer: the secret is never stored (header Secret-Redacted).
  const properties = { ...(base.properties as Record<string, JsonSchema>), [field]: { type: ["string", "null"], description } };
  return { ...base, title: name, properties, required: [...(base.required as string[]), field] };
}

export const date = {
  type: "string",
  pattern: "^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,3})?)?(Z|[+-]\\d{2}:\\d{2}))?$",
  description: "An ISO 8601 date (UTC) or a time with a zone",
  examples: ["2026-11-23T10:00:00Z"],
};
/** A time (GET /runs' range): a date, `T` and a time, as Date.parse reads it. */
export const instant = {
  type: "string",
  maxLength: 64,
  pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,3})?)?(Z|[+-]\\d{2}:\\d{2})?$",
  description: "An ISO 8601 time, e.g. 2026-01-31T12:00:00Z",
  examples: ["2026-01-31T12:00:00Z"],
};

/** The metadata of every list. */
export const COMMON_RESOURCES: Record<string, JsonSchema> = {
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
