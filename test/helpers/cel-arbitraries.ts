import fc from "fast-check";

/** CEL expressions over `input` (`a`, `n`, `s`, `list`, `items`, `x`), valid or not, for property tests. */
const path = fc
  .array(fc.constantFrom("a", "b", "n", "s", "list", "items", "0", "x"), { minLength: 1, maxLength: 3 })
  .map((p) => `input.${p.filter((s) => !/^\d/.test(s)).join(".") || "a"}`);
const literal = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }).map(String),
  fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((d) => (Number.isInteger(d) ? `${d}.0` : String(d))),
  fc.constantFrom('"abc"', '""', "true", "false", "null", "[1, 2.5, 3]", '{"k": 1}', '["x", "y"]'),
);
export const expression: fc.Arbitrary<string> = fc.letrec<{ e: string }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    literal,
    path,
    fc
      .tuple(tie("e"), fc.constantFrom("+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "in"), tie("e"))
      .map(([a, op, b]) => `(${a} ${op} ${b})`),
    fc.tuple(fc.constantFrom("size", "string", "int", "double", "has", "!"), path).map(([f, a]) => (f === "!" ? `!${a}` : `${f}(${a})`)),
    fc
      .tuple(
        tie("e"),
        fc.constantFrom("lower()", "upper()", "trim()", "sum()", "min()", "max()", "size()", 'split(",")', 'join("-")', 'contains("a")'),
      )
      .map(([a, m]) => `${a}.${m}`),
    fc.tuple(path, tie("e")).map(([p, d]) => `default(${p}, ${d})`),
    fc.tuple(tie("e"), tie("e"), tie("e")).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
    fc
      .tuple(fc.constantFrom("map", "filter", "all", "exists"), tie("e"))
      .map(([m, body]) => `input.list.${m}(v, ${body.replaceAll("input.a", "v")})`),
  ),
})).e;
