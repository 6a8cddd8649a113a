import { inspect } from "node:util";

/**
 * The logs' line format: one JSON object per line, `{ts, level, msg, nodeID, ns, mod, svc, …}`,
 * where the fields of any plain object passed to the logger become fields of the line (so
 * `logger.debug({request_id, status}, "request")` is searchable by `request_id`), and errors
 * become `{name, message, code, stack}`. (Moleculer's own "json" format prints objects into `msg`.)
 */
const errorFields = (err: Error) => ({
  name: err.name,
  message: err.message,
  ...((err as { code?: unknown }).code !== undefined && { code: (err as { code?: unknown }).code }),
  stack: err.stack,
});

export function jsonLines(type: string, args: unknown[], bindings: Record<string, unknown> = {}): string[] {
  // No prototype: a logged object's `__proto__` key (clients' JSON may hold one) is a field like any other.
  const fields: Record<string, unknown> = Object.create(null);
  const words: string[] = [];
  for (const arg of args) {
    if (arg instanceof Error) fields.err = errorFields(arg);
    else if (arg !== null && typeof arg === "object" && !Array.isArray(arg)) {
      for (const [k, v] of Object.entries(arg)) fields[k] = v instanceof Error ? errorFields(v) : v;
    } else words.push(typeof arg === "string" ? arg : inspect(arg));
  }
  const line = { ts: Date.now(), level: type, msg: words.join(" "), ...bindings, ...fields };
  try {
    return [JSON.stringify(line)];
  } catch {
    return [JSON.stringify({ ts: line.ts, level: type, msg: `${line.msg} ${inspect(fields, { depth: 3 })}`, ...bindings })];
  }
}
