import { isIP } from "node:net";
import { ApiError } from "../../shared/errors";

/** Unknown parameters a message names at most; the rest are counted (a body may hold a thousand). */
export const UNKNOWN_NAMED = 3;

/** Methods whose parameters come from the JSON body only: a query parameter there is refused. */
const BODY_METHODS = new Set(["POST", "PATCH"]);

const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,99}$/;
/** A parameter's name as a message shows it: plain names as they are, others as a JSON string of at most 100 characters. */
export const shownName = (name: string): string => {
  if (PLAIN_NAME.test(name)) return name;
  let cut = name.length > 100 ? name.slice(0, 100) : name;
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return JSON.stringify(cut.length < name.length ? `${cut}…` : cut);
};

/** `parameter_unknown` naming the first of `names` (as `param`) and a few more in its message. */
export function unknownParameters(names: readonly string[], total = names.length, why = ""): ApiError {
  const shown = names.slice(0, UNKNOWN_NAMED).map(shownName).join(", ");
  const more = total > UNKNOWN_NAMED ? ` and ${total - UNKNOWN_NAMED} more` : "";
  const noun = total === 1 ? "parameter" : "parameters";
  return new ApiError("parameter_unknown", `Received unknown ${noun}: ${shown}${more}${why}`, { param: names[0] });
}

/**
 * The parameters an action is called with: the body's, the query's and the path's, refused when
 * they clash or are unknown, before anything is copied.
 * - A path parameter cannot also be sent in the body or the query (it would be hidden).
 * - POST and PATCH take their parameters from the JSON body only: a query parameter there is
 *   refused, so `POST /api-keys?scopes=…` cannot stand in for the body's scopes. Other methods
 *   take them from the query; one sent in both the query and a body is refused.
 * - With `known` (the action's declared parameters; null when it takes any), a parameter it does
 *   not declare is refused, naming at most UNKNOWN_NAMED of them.
 */
export function inputOf(
  method: string,
  body: Record<string, unknown> | undefined,
  query: Record<string, unknown>,
  path: Record<string, string>,
  known: ReadonlySet<string> | null,
): Record<string, unknown> {
  for (const name of Object.keys(path)) {
    if ((body && Object.hasOwn(body, name)) || Object.hasOwn(query, name)) {
      throw unknownParameters([name], 1, " (it is part of the path)");
    }
  }
  const queryNames = Object.keys(query);
  if (BODY_METHODS.has(method) && queryNames.length > 0) {
    throw unknownParameters(queryNames, queryNames.length, ` in the query: ${method} takes its parameters in the JSON body`);
  }
  if (body) {
    for (const name of queryNames) {
      if (Object.hasOwn(body, name)) {
        throw new ApiError("parameter_invalid", `${shownName(name)} is sent in both the query and the body; send it once`, { param: name });
      }
    }
  }
  if (known !== null) {
    const unknown: string[] = [];
    let count = 0;
    for (const names of [body ? Object.keys(body) : [], queryNames]) {
      for (const name of names) {
        if (known.has(name)) continue;
        count += 1;
        if (unknown.length < UNKNOWN_NAMED) unknown.push(name);
      }
    }
    if (count > 0) throw unknownParameters(unknown, count);
  }
  return { ...body, ...query, ...path };
}

/**
 * The key a client address's budgets are kept under: an IPv4 address as it is (an IPv4-mapped IPv6
 * one, `::ffff:1.2.3.4`, as its IPv4 form), an IPv6 address cut to its /64 network, which one
 * subscriber usually holds whole: keyed by the full address, one host could rotate through 2^64
 * budgets. Anything else (a proxy's unparseable word) as it is.
 */
export function addressKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1];
  const bare = address.replace(/%.*$/, "");
  if (isIP(bare) !== 6) return address;
  const groups = expandIpv6(bare);
  return `${groups.slice(0, 4).join(":")}::/64`;
}

/** The eight groups of an IPv6 address, lower-case without leading zeros (an embedded IPv4 tail as two groups). */
function expandIpv6(address: string): string[] {
  let text = address.toLowerCase();
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number);
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const fill = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...fill, ...right].map((g) => parseInt(g, 16).toString(16));
}
