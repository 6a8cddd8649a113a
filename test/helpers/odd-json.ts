import fc from "fast-check";

/**
 * Keys that mean something to some engine or to JavaScript, and characters that broke line- or
 * C-string-based formats; generated keys and strings draw on them besides any Unicode.
 */
export const SPECIAL_KEYS = [
  "",
  ".",
  "a.b",
  "$",
  "$x",
  "$$date",
  "$set",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "_id",
  "id",
  "%",
  "%2E",
  "\u0000",
  "\u2028",
  "\u2029",
  "\u0085",
  "\ufeff",
  "a\u0000b",
  "😀",
];
export const SPECIAL_CHARS = ["\u0000", "\u2028", "\u2029", "\u0085", "\n", "\r", '"', "\\", "\ufeff", "\u{1F600}", "\t", "%"];
export const anyString = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 12 }),
  fc
    .array(
      fc.oneof(
        fc.constantFrom(...SPECIAL_CHARS),
        fc.string({ unit: "binary", maxLength: 3 }).filter((s) => s.isWellFormed()),
      ),
      { maxLength: 6 },
    )
    .map((parts) => parts.join("")),
);
export const anyKey = fc.oneof(fc.constantFrom(...SPECIAL_KEYS), anyString);
/** Any JSON value a client can send (well-formed strings; finite numbers), a few levels deep. */
export const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", maxDepth: 5 },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
    fc.constantFrom(Number.MAX_SAFE_INTEGER, Number.MIN_VALUE, 1e308, -1e-308, 0.1),
    anyString,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(anyKey, tie("value"), { maxKeys: 5, noNullPrototype: true }),
  ),
})).value;
/** The odd keys, and the ones the cluster serializer escapes (`__proto__` with underscores). */
const SERIALIZER_KEYS = [...SPECIAL_KEYS, "__proto_", "__proto___"];
/** Any JSON value with odd keys (well-formed strings, any finite double), for the JSON limits and the cluster's serializer. */
export const jsonWithOddKeys: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  json: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => (Object.is(n, -0) ? 0 : n)),
    fc.string({ unit: "grapheme" }),
    fc.array(tie("json"), { maxLength: 4 }),
    fc.dictionary(
      fc.oneof(
        fc.constantFrom(...SERIALIZER_KEYS),
        fc.string({ unit: "grapheme", maxLength: 6 }),
        fc.string({ unit: "binary", maxLength: 4 }).filter((s) => s.isWellFormed()),
      ),
      tie("json"),
      { maxKeys: 4 },
    ),
  ),
})).json;
