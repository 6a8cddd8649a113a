/**
 * Limits on the JSON the platform takes in: from clients (request bodies, through the gateway) and
 * from their servers (the answers of workflow `http` steps).
 *
 * Nesting: every object and every array is one level, empty or not; the outermost value is level 1,
 * scalars add none. `{"data":{"a":[1]}}` is 3 levels deep: the body, `data`, `data.a`. A value of
 * more than MAX_JSON_DEPTH levels is refused, naming the path of the first object or array (in the
 * order of the text) that sits at level MAX_JSON_DEPTH + 1.
 *
 * Keys and items (request bodies only): at most MAX_JSON_OBJECT_KEYS keys in one object,
 * MAX_JSON_KEYS in all the objects of a body, and MAX_JSON_ITEMS items in all its arrays. Building,
 * copying, validating and echoing a value costs time in proportion to what it holds, all of it on
 * the event loop that answers every other request: a 1 MiB body holds about 75,000 keys or 350,000
 * empty objects. The count is made on the text, before JSON.parse builds anything.
 *
 * Numbers (request bodies only): each must be a number a double holds exactly, as the stores keep
 * it: `1e400` (Infinity, stored as null), `9007199254740993` (2^53 + 1, stored as ...992),
 * `1e-400` (0) and `-0` (0) would change silently, and are refused instead.
 *
 * Text: every string, keys included, must be well-formed Unicode. JSON can carry lone UTF-16
 * surrogates as escapes (`"\ud800"`), which no UTF-8 store or receiver can hold as they are.
 *
 * Every check here is a loop over an explicit stack, never recursion: a client decides how deep its
 * JSON is, and no value it sends may exhaust the call stack or hold the event loop for long.
 */
import { limitsOf, MAX_JSON_DEPTH, MAX_JSON_ITEMS, MAX_JSON_KEYS, MAX_JSON_OBJECT_KEYS } from "./json-bounds";
import type { JsonCheck, JsonFault, JsonLimits, PathSegment } from "./json-bounds";
import { exceedsLimits, scanJson } from "./json-scan";
import { escapesLoneSurrogate, findJsonFault } from "./json-unicode";
import { parseJson } from "./json-parse";

export {
  BODY_LIMITS,
  MAX_JSON_DEPTH,
  MAX_JSON_ITEMS,
  MAX_JSON_KEYS,
  MAX_JSON_OBJECT_KEYS,
  type JsonCheck,
  type JsonFault,
  type JsonLimits,
  type PathSegment,
} from "./json-bounds";
export { decimalKey, isExactNumber } from "./json-tokens";
export { exceedsLimits, scanJson } from "./json-scan";
export { escapesLoneSurrogate, findJsonFault } from "./json-unicode";

/** Keys written after a dot in a path; any other key is written as a JSON string in brackets. */
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;
/** Keys longer than this are cut in paths (error messages stay short whatever a client sends). */
const KEY_SHOWN_MAX = 100;

/**
 * A path as the API names parameters: `data.items[3].name`, with keys that are not plain names in
 * brackets as JSON strings (`data["a.b"]`, `input[""]`, `data["\ud800"]`, escaped so the path is
 * itself well-formed). `root` is prefixed as it is (`steps[2].body`).
 */
export function formatPath(path: readonly PathSegment[], root = ""): string {
  let out = root;
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (segment.length <= KEY_SHOWN_MAX && PLAIN_KEY.test(segment)) out += out === "" ? segment : `.${segment}`;
    else {
      let shown = segment;
      if (shown.length > KEY_SHOWN_MAX) {
        shown = shown.slice(0, KEY_SHOWN_MAX);
        // Do not cut a surrogate pair in two.
        if (/[\uD800-\uDBFF]$/.test(shown)) shown = shown.slice(0, -1);
        shown += "…";
      }
      out += `[${JSON.stringify(shown)}]`;
    }
  }
  return out;
}

/**
 * Whether a JSON text nests objects and arrays deeper than `max`. Lenient (it only counts brackets
 * outside strings, which is exact for valid JSON) and allocation-free: the fast path for every body.
 */
export function nestsDeeperThan(text: string, max: number = MAX_JSON_DEPTH): boolean {
  return exceedsLimits(text, limitsOf(max));
}

/**
 * Parses a JSON text under the limits: `invalid_json` when it is not JSON (checked first, so a body
 * that is both broken and deep is called broken); else the first fault in the order of the text of
 * `too_deep` (the first container past the depth), `too_wide` (the first object with too many keys)
 * and `too_many_keys` (the object where the count in all crossed its limit); else
 * `not_well_formed` with the path of the first string or key holding a lone surrogate. Texts past
 * a limit are refused before JSON.parse builds them; the parsed value is only walked (for the path)
 * when the text does escape a lone surrogate (or is itself not well-formed).
 */
export function parseJsonWithinLimits(text: string, limits: number | JsonLimits = MAX_JSON_DEPTH): JsonCheck {
  const held = limitsOf(limits);
  if (exceedsLimits(text, held)) {
    const scanned = scanJson(text, held);
    if (!scanned.valid) return { ok: false, kind: "invalid_json" };
    if (scanned.fault) return { ok: false, ...scanned.fault };
  }
  let value: unknown;
  try {
    value = parseJson(text);
  } catch {
    return { ok: false, kind: "invalid_json" };
  }
  if (escapesLoneSurrogate(text) || !text.isWellFormed()) {
    const fault = findJsonFault(value, { max: held.depth, depth: false });
    if (fault) return { ok: false, ...fault };
  }
  return { ok: true, value };
}

/** The fault in words, after a subject: `nested deeper than 32 levels of objects and arrays (at data.a)`. */
export function describeJsonFault(fault: JsonFault, root = "", max: number = MAX_JSON_DEPTH): string {
  const where = formatPath(fault.path, root) || "the top level";
  if (fault.kind === "too_deep") return `nested deeper than ${max} levels of objects and arrays (at ${where})`;
  if (fault.kind === "too_wide") return `an object with more than ${MAX_JSON_OBJECT_KEYS} keys (at ${where})`;
  if (fault.kind === "too_many_keys") return `more than ${MAX_JSON_KEYS} keys in all (crossed at ${where})`;
  if (fault.kind === "too_many_items") return `more than ${MAX_JSON_ITEMS} array items in all (crossed at ${where})`;
  if (fault.kind === "inexact_number") return `a number no double holds exactly (at ${where})`;
  return `not well-formed Unicode: ${fault.key ? "a key" : "a string"} holds a lone UTF-16 surrogate (at ${where})`;
}
