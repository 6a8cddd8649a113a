import { compile, ExpressionError, type Place } from "./cel";
import { isPathForm, PATH_REFERENCE, SECRET_REFERENCE, TEMPLATE, wholeTemplate } from "../templates";
import { formatPath } from "../../../shared/api/json-limits";

/** Says what is wrong with a field of the definition: a 400 naming it (`steps[3].if`, `trigger.filter`). */
export type Fault = (field: string, message: string) => Error;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Compiles `inner` for `place`; a fault naming the field, the expression and the position in it. */
function compiled(fault: Fault, field: string, inner: string, place: Place, earlier?: ReadonlySet<string>) {
  let c;
  try {
    c = compile(inner, place);
  } catch (err) {
    if (!(err instanceof ExpressionError)) throw err;
    const hint = /Unknown variable: secrets/.test(err.message) ? " (a secret is used as {{secrets.NAME}} alone, in http steps)" : "";
    throw fault(field, `'${inner.trim()}': ${err.message} at character ${err.position + 1} of the expression${hint}`);
  }
  for (const id of c.reads.steps ?? [])
    if (earlier && !earlier.has(id)) throw fault(field, `'${inner.trim()}' refers to step '${id}', which is not an earlier step`);
  return c;
}

/**
 * Every `{{…}}` in the strings of `value`: a path form (as before CEL: the input, an earlier step's
 * output, the run, or in an http step, whose request alone leaves unstored, a secret: a secret in an
 * event's data or an approval's message would be stored and published in clear) or a CEL expression
 * that compiles, reading earlier steps only.
 */
export function checkTemplates(fault: Fault, field: string, value: unknown, earlier: ReadonlySet<string>, type: string): void {
  if (typeof value === "string") {
    if (!value.includes("{{")) return;
    for (const match of value.matchAll(TEMPLATE)) {
      const inner = match[1];
      if (isPathForm(inner)) {
        if (SECRET_REFERENCE.test(inner) && type !== "http")
          throw fault(
            field,
            `'{{${inner.trim()}}}': secrets can be used in http steps only (url, headers, body), where they are never stored`,
          );
        const ref = PATH_REFERENCE.exec(inner);
        if (ref?.[1] !== undefined && !earlier.has(ref[1]))
          throw fault(field, `'{{${inner.trim()}}}' refers to '${ref[1]}', which is not an earlier step`);
        continue;
      }
      compiled(fault, field, inner, "step", earlier);
    }
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => checkTemplates(fault, `${field}[${i}]`, v, earlier, type));
  } else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) checkTemplates(fault, formatPath([k], field), v, earlier, type);
  }
}

/** A condition (a step's `if`, a trigger's `filter`): CEL, braces optional, that can give a boolean. */
export function checkCondition(fault: Fault, field: string, raw: unknown, place: Place, earlier?: ReadonlySet<string>): string {
  if (typeof raw !== "string" || raw.trim() === "") throw fault(field, `${field.split(".").pop()} must be a CEL expression (a string)`);
  const inner = wholeTemplate(raw.trim()) ?? raw;
  if (isPathForm(inner) && SECRET_REFERENCE.test(inner)) throw fault(field, "a condition cannot read a secret");
  const c = compiled(fault, field, inner, place, earlier);
  // `dyn` (a value read from JSON) may be a boolean when the run comes: checked then.
  const type = c.type;
  if (type !== "bool" && type !== "dyn") throw fault(field, `'${inner.trim()}' gives ${type}, not a boolean (true or false)`);
  return raw;
}
