import fc from "fast-check";

/**
 * fast-check arbitraries made from the API reference's JSON Schemas: values the schema accepts
 * (`valueOf`), and requests that break one rule it states (`brokenOf`). Strings keep to letters,
 * digits and a few marks (no `{`, so a step's text never reads as a template).
 */
type Json = Record<string, any>;

export interface Generation {
  /** The document's components, for `$ref`. */
  schemas: Record<string, Json>;
  /** Values to use for a property of this name instead of generating one (a receiver's URL, an existing id). */
  fixed?: Record<string, fc.Arbitrary<unknown>>;
  /** Components left out where they are one choice of several. */
  leftOut?: ReadonlySet<string>;
  /**
   * Components that hold a list of their parent (map and parallel steps), so a schema that refers
   * to itself: generated while a value is inside fewer than `maxNesting` of them, left out deeper,
   * which bounds the recursion (and the size: each level multiplies the steps by up to 3).
   */
  nested?: ReadonlySet<string>;
  maxNesting?: number;
  /** How many `nested` components the value being generated is inside (valueOf keeps it). */
  depth?: number;
}

const refName = (part: Json): string | undefined => (typeof part.$ref === "string" ? (part.$ref.split("/").pop() as string) : undefined);

const CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.:/!?".split("");
const text = (min: number, max: number) => fc.string({ unit: fc.constantFrom(...CHARS), minLength: min, maxLength: max });
const jsonLeaf = fc.oneof(text(0, 12), fc.integer({ min: -1000, max: 1000 }), fc.boolean(), fc.constant(null));
const anyJson = fc.oneof(
  jsonLeaf,
  fc.array(jsonLeaf, { maxLength: 3 }),
  fc.dictionary(fc.stringMatching(/^[a-z]{1,8}$/), jsonLeaf, { maxKeys: 3 }),
);

const resolve = (schema: Json, g: Generation): Json =>
  typeof schema.$ref === "string" ? resolve(g.schemas[schema.$ref.split("/").pop() as string], g) : schema;

/**
 * Strings by their rule, each built once: fast-check compiles a pattern in 25 to 170 ms, and every
 * step kind (at every level of map and parallel steps) repeats the same few.
 */
const strings = new Map<string, fc.Arbitrary<string>>();
function stringOf(s: Json): fc.Arbitrary<string> {
  const key = JSON.stringify([s.minLength, s.maxLength, s.format, s.pattern]);
  let arb = strings.get(key);
  if (arb === undefined) strings.set(key, (arb = buildString(s)));
  return arb;
}
function buildString(s: Json): fc.Arbitrary<string> {
  const min = s.minLength ?? 0;
  const max = Math.min(s.maxLength ?? 40, 40, Math.max(min, 40));
  if (s.format === "date-time") {
    // In the future: the one date-time a client writes is a key's expiry.
    return fc.integer({ min: 1, max: 300 }).map((days) => new Date(Date.now() + days * 86_400_000).toISOString());
  }
  if (s.format === "email") return fc.stringMatching(/^[a-z][a-z0-9]{2,12}$/).map((local) => `${local}@example.com`);
  if (s.format === "uri") return fc.stringMatching(/^[a-z]{1,10}$/).map((p) => `https://example.com/${p}`);
  if (s.pattern !== undefined) {
    const re = new RegExp(s.pattern);
    const arb = re.source === "\\S" ? text(Math.max(min, 1), max).filter((v) => /\S/.test(v)) : fc.stringMatching(re);
    return arb.filter((v) => v.length >= min && v.length <= (s.maxLength ?? Infinity));
  }
  return text(min, max);
}

/** Values `schema` accepts. */
export function valueOf(schema: Json, g: Generation, name?: string): fc.Arbitrary<unknown> {
  if (name !== undefined && g.fixed?.[name]) return g.fixed[name];
  const s = resolve(schema, g);
  if ("const" in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum);
  if (Array.isArray(s.oneOf)) {
    const depth = g.depth ?? 0;
    const kept = s.oneOf.filter((part: Json) => {
      const ref = refName(part);
      return ref === undefined || !(g.leftOut?.has(ref) || (g.nested?.has(ref) && depth >= (g.maxNesting ?? 0)));
    });
    return fc.oneof(
      ...kept.map((part: Json) => {
        const ref = refName(part);
        return valueOf(part, ref !== undefined && g.nested?.has(ref) ? { ...g, depth: depth + 1 } : g);
      }),
    );
  }
  if (Array.isArray(s.anyOf)) return fc.oneof(...s.anyOf.map((part: Json) => valueOf(part, g)));
  const types: string[] = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  if (types.length > 1) return fc.oneof(...types.map((type) => valueOf({ ...s, type }, g)));
  const base: fc.Arbitrary<unknown> = (() => {
    switch (types[0]) {
      case "null":
        return fc.constant(null);
      case "boolean":
        return fc.boolean();
      case "integer":
      case "number":
        return fc.integer({ min: s.minimum ?? -1000, max: Math.min(s.maximum ?? 100_000, 100_000) });
      case "string":
        return stringOf(s);
      case "array":
        return fc.array(valueOf(s.items ?? {}, g), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 3, 3) });
      case "object":
        return objectOf(s, g);
      default:
        return anyJson;
    }
  })();
  return s.not?.pattern ? base.filter((v) => typeof v !== "string" || !new RegExp(s.not.pattern).test(v)) : base;
}

function objectOf(s: Json, g: Generation): fc.Arbitrary<Record<string, unknown>> {
  if (s.properties === undefined) {
    if (s.additionalProperties && typeof s.additionalProperties === "object") {
      const key = s.propertyNames?.pattern ? fc.stringMatching(new RegExp(s.propertyNames.pattern)) : fc.stringMatching(/^[a-z]{1,8}$/);
      const minKeys = s.minProperties ?? 0;
      return fc.dictionary(
        key.filter((k) => k.length <= 40),
        valueOf(s.additionalProperties, g),
        { minKeys, maxKeys: Math.max(minKeys, Math.min(s.maxProperties ?? 3, 3)) },
      );
    }
    return fc.dictionary(fc.stringMatching(/^[a-z]{1,8}$/), jsonLeaf, { maxKeys: 3 });
  }
  const required = new Set<string>(s.required ?? []);
  const props = Object.fromEntries(Object.entries<Json>(s.properties).map(([name, prop]) => [name, valueOf(prop, g, name)]));
  return fc.record(props, { requiredKeys: Object.keys(props).filter((n) => required.has(n)) }) as fc.Arbitrary<Record<string, unknown>>;
}

/** A value of the wrong kind for `schema` (a number for a string, a string for anything else). */
function wrongKind(schema: Json, g: Generation): unknown | undefined {
  const s = resolve(schema, g);
  const types: string[] = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  if (types.length === 0) return s.oneOf || s.anyOf ? 42 : undefined;
  return types.includes("string") ? 42 : "not-a-value";
}

export type Broken = { body: Record<string, unknown>; how: string };

/**
 * A body the schema refuses, made from a valid one: a required field left out, an unknown field
 * added, a field of the wrong kind, or null where the schema does not allow it.
 */
export function brokenOf(schema: Json, g: Generation, valid: Record<string, unknown>): fc.Arbitrary<Broken> {
  const s = resolve(schema, g);
  const choices: Broken[] = [];
  for (const name of s.required ?? []) {
    const { [name]: _gone, ...rest } = valid;
    choices.push({ body: rest, how: `without ${name}` });
  }
  if (s.additionalProperties === false) choices.push({ body: { ...valid, zz_unknown: 1 }, how: "with an unknown field" });
  for (const [name, prop] of Object.entries<Json>(s.properties ?? {})) {
    const bad = wrongKind(prop, g);
    if (bad !== undefined) choices.push({ body: { ...valid, [name]: bad }, how: `with ${name}: ${JSON.stringify(bad)}` });
    const p = resolve(prop, g);
    const nullable = p.type === "null" || (Array.isArray(p.type) && p.type.includes("null")) || p.type === undefined;
    if (!nullable) choices.push({ body: { ...valid, [name]: null }, how: `with ${name}: null` });
  }
  return fc.constantFrom(...choices);
}
