/** The API reference's schemas from validator rules, and examples that satisfy schemas. */
import { idOf } from "../shared/api/schemas";

export type Json = Record<string, unknown>;

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

export const isOptional = (rule: unknown): boolean =>
  typeof rule === "string" ? rule.includes("|optional") : Boolean((rule as Json).optional) || (rule as Json).default !== undefined;

export function objectOf(props: Json): Json {
  const fields = Object.entries(props).filter(([name]) => !name.startsWith("$$"));
  const required = fields.filter(([, rule]) => !isOptional(rule)).map(([name]) => name);
  return {
    properties: Object.fromEntries(fields.map(([name, rule]) => [name, jsonSchemaOf(rule)])),
    ...(required.length > 0 && { required }),
    additionalProperties: props.$$strict ? false : true,
  };
}

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
