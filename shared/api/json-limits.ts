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
export const MAX_JSON_DEPTH = 32;
/** Keys of one object in a request body. */
export const MAX_JSON_OBJECT_KEYS = 1_000;
/** Keys of all the objects in a request body together. */
export const MAX_JSON_KEYS = 10_000;
/** Items of all the arrays in a request body together. */
export const MAX_JSON_ITEMS = 50_000;

/** What a text is held to: nesting, and (optionally) keys per object and in all, array items in all, exact numbers. */
export interface JsonLimits {
  depth: number;
  objectKeys?: number;
  keys?: number;
  items?: number;
  exactNumbers?: boolean;
}

/** The limits of a request body. */
export const BODY_LIMITS: JsonLimits = {
  depth: MAX_JSON_DEPTH,
  objectKeys: MAX_JSON_OBJECT_KEYS,
  keys: MAX_JSON_KEYS,
  items: MAX_JSON_ITEMS,
  exactNumbers: true,
};

const limitsOf = (limits: number | JsonLimits): Required<JsonLimits> =>
  typeof limits === "number"
    ? { depth: limits, objectKeys: Infinity, keys: Infinity, items: Infinity, exactNumbers: false }
    : {
        depth: limits.depth,
        objectKeys: limits.objectKeys ?? Infinity,
        keys: limits.keys ?? Infinity,
        items: limits.items ?? Infinity,
        exactNumbers: limits.exactNumbers ?? false,
      };

/** One step of a path: an object's key or an array's index. */
export type PathSegment = string | number;

/**
 * Where a value breaks a limit. `too_wide`: the object at `path` has too many keys; `too_many_keys`:
 * the body has too many in all, the limit crossed in the object at `path`; `too_many_items`: as
 * many, of array items, crossed in the array at `path`; `inexact_number`: the number at `path` is
 * not one a double holds exactly. `key` when it is the key of the member at `path` that is ill-formed.
 */
export type JsonFault = {
  kind: "too_deep" | "not_well_formed" | "too_wide" | "too_many_keys" | "too_many_items" | "inexact_number";
  path: PathSegment[];
  key?: true;
};

export type JsonCheck = { ok: true; value: unknown } | { ok: false; kind: "invalid_json" } | ({ ok: false } & JsonFault);

/** `\uD800`–`\uDFFF` escapes in a JSON text (or text that looks like one, after an escaped backslash). */
const SURROGATE_ESCAPES = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;
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
 * Whether a JSON text breaks its limits: nesting, and keys per object and in all (a key is counted
 * at its colon). Lenient in the same way, and allocation-free but for a counter per level.
 */
export function exceedsLimits(text: string, limits: Required<JsonLimits>): boolean {
  const { depth: max, objectKeys, keys, items, exactNumbers } = limits;
  const counting = objectKeys !== Infinity || keys !== Infinity || items !== Infinity;
  // Keys so far of the object open at each level (levels past `max` are refused before they count).
  const members = counting ? new Int32Array(max + 2) : null;
  // Whether the container open at each level is an array. Items are over-counted by one per empty
  // array (each array counts one, and each comma in it one more): the slow path counts exactly.
  const arrays = counting ? new Uint8Array(max + 2) : null;
  let total = 0;
  let itemCount = 0;
  let depth = 0;
  for (let i = 0, n = text.length; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // To the closing quote: the next one not escaped by an odd run of backslashes.
      let j = i;
      for (;;) {
        j = text.indexOf('"', j + 1);
        if (j < 0) return false; // unterminated: not JSON, which JSON.parse will say
        let k = j - 1;
        while (text.charCodeAt(k) === 0x5c /* \ */) k--;
        if ((j - 1 - k) % 2 === 0) break;
      }
      i = j;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > max) return true;
      if (members && arrays) {
        members[depth] = 0;
        arrays[depth] = c === 0x5b ? 1 : 0;
        if (c === 0x5b && ++itemCount > items) return true;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    } else if (c === 0x3a /* : */ && members && depth > 0) {
      if (++members[depth] > objectKeys || ++total > keys) return true;
    } else if (c === 0x2c /* , */ && arrays && arrays[depth] === 1) {
      if (++itemCount > items) return true;
    } else if (exactNumbers && (c === 0x2d /* - */ || isDigit(c))) {
      let end = i + 1;
      while (end < n && isNumberChar(text.charCodeAt(end))) end++;
      if (!isExactNumber(text, i, end)) return true;
      i = end - 1;
    }
  }
  return false;
}

const isNumberChar = (c: number) => isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;

/**
 * A decimal number's value as `[-]digits e exponent`, digits without leading or trailing zeros (zero
 * as `0` or `-0`): two texts of the same value give the same key (`1.50`, `15e-1` and `0.15e1`).
 */
export function decimalKey(text: string): string {
  const negative = text.charCodeAt(0) === 0x2d;
  const e = text.search(/[eE]/);
  const mantissa = text.slice(negative ? 1 : 0, e < 0 ? text.length : e);
  const dot = mantissa.indexOf(".");
  const fraction = dot < 0 ? "" : mantissa.slice(dot + 1);
  let digits = (dot < 0 ? mantissa : mantissa.slice(0, dot)) + fraction;
  let exponent = (e < 0 ? 0 : Number(text.slice(e + 1))) - fraction.length;
  let start = 0;
  while (start < digits.length && digits.charCodeAt(start) === 0x30) start++;
  let end = digits.length;
  while (end > start && digits.charCodeAt(end - 1) === 0x30) end--;
  if (start === end) return negative ? "-0" : "0";
  exponent += digits.length - end;
  digits = digits.slice(start, end);
  return `${negative ? "-" : ""}${digits}e${exponent}`;
}

/**
 * Whether the number token text[start, end) is one a double holds exactly: JSON.parse, then
 * JSON.stringify, gives back the same value (and it is not a negative zero). Most tokens are passed at a glance (up to 15
 * significant digits, no exponent, not a negative zero); the rest are compared by value.
 */
export function isExactNumber(text: string, start: number, end: number): boolean {
  let digits = 0;
  let plain = true;
  let leading = true;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x65 || c === 0x45) plain = false;
    else if (isDigit(c) && !(leading && c === 0x30)) {
      digits++;
      leading = false;
    }
  }
  if (plain && digits <= 15 && !(text.charCodeAt(start) === 0x2d && digits === 0)) return true;
  const token = text.slice(start, end);
  const value = Number(token);
  // A negative zero is stored (and written back) as 0.
  if (!Number.isFinite(value) || Object.is(value, -0)) return false;
  return decimalKey(token) === decimalKey(String(value));
}

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);

/** After the string token starting at `i` (a `"`), or -1 if it is not one. */
function skipString(text: string, i: number): number {
  const n = text.length;
  for (i++; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) return i + 1;
    if (c < 0x20) return -1;
    if (c === 0x5c) {
      const e = text.charCodeAt(++i);
      if (e === 0x75 /* u */) {
        if (!(
          isHex(text.charCodeAt(i + 1)) &&
          isHex(text.charCodeAt(i + 2)) &&
          isHex(text.charCodeAt(i + 3)) &&
          isHex(text.charCodeAt(i + 4))
        ))
          return -1;
        i += 4;
      } else if (!'"\\/bfnrt'.includes(text[i] ?? "x")) {
        return -1;
      }
    }
  }
  return -1;
}

/** After the number token starting at `i`, or -1. */
function skipNumber(text: string, i: number): number {
  if (text.charCodeAt(i) === 0x2d) i++;
  if (text.charCodeAt(i) === 0x30) i++;
  else if (isDigit(text.charCodeAt(i))) while (isDigit(text.charCodeAt(i))) i++;
  else return -1;
  if (text.charCodeAt(i) === 0x2e) {
    if (!isDigit(text.charCodeAt(++i))) return -1;
    while (isDigit(text.charCodeAt(i))) i++;
  }
  if (text.charCodeAt(i) === 0x65 || text.charCodeAt(i) === 0x45) {
    i++;
    if (text.charCodeAt(i) === 0x2b || text.charCodeAt(i) === 0x2d) i++;
    if (!isDigit(text.charCodeAt(i))) return -1;
    while (isDigit(text.charCodeAt(i))) i++;
  }
  return i;
}

/**
 * The slow path, for a text that breaks a limit: whether it is valid JSON at all (ECMA-404, as
 * JSON.parse reads it) and, if so, the path of the first object or array deeper than the limit
 * (`tooDeep`) and the first fault of any kind in the order of the text (`fault`). One pass over the
 * text; the only memory it takes is a byte per open container (a typed array), counters per level
 * and the keys of a path, decoded when a fault is found.
 */
export function scanJson(
  text: string,
  limits: number | JsonLimits = MAX_JSON_DEPTH,
): { valid: false } | { valid: true; tooDeep: PathSegment[] | null; fault: JsonFault | null } {
  const { depth: max, objectKeys, keys, items, exactNumbers } = limitsOf(limits);
  const n = text.length;
  // Per open container: is it an array (1) or an object (0). Each takes at least a character.
  const arrays = new Uint8Array(n + 1);
  // For the levels up to `max`: the current index (arrays) and the current key's token (objects).
  const indexes = new Int32Array(max + 1);
  const keyStarts = new Int32Array(max + 1);
  const keyEnds = new Int32Array(max + 1);
  const members = new Int32Array(max + 1);
  let total = 0;
  let itemCount = 0;
  let depth = 0;
  let tooDeep: PathSegment[] | null = null;
  let fault: JsonFault | null = null;
  let i = 0;
  /** The path of the container open at level `levels` + 1: the current member of each around it. */
  const pathAt = (levels: number): PathSegment[] => {
    const path: PathSegment[] = [];
    for (let level = 0; level < levels; level++) {
      path.push(arrays[level] ? indexes[level] : (JSON.parse(text.slice(keyStarts[level], keyEnds[level])) as string));
    }
    return path;
  };
  const ws = () => {
    while (i < n && isWs(text.charCodeAt(i))) i++;
  };
  /** A key and its colon at i, in the object at `depth`; false when there is none. */
  const key = (): boolean => {
    if (text.charCodeAt(i) !== 0x22) return false;
    const end = skipString(text, i);
    if (end < 0) return false;
    if (depth <= max) {
      keyStarts[depth - 1] = i;
      keyEnds[depth - 1] = end;
      members[depth - 1] += 1;
      total += 1;
      if (fault === null && members[depth - 1] > objectKeys) fault = { kind: "too_wide", path: pathAt(depth - 1) };
      else if (fault === null && total > keys) fault = { kind: "too_many_keys", path: pathAt(depth - 1) };
    }
    i = end;
    ws();
    if (text.charCodeAt(i) !== 0x3a) return false;
    i++;
    ws();
    return true;
  };
  let expectValue = true;
  ws();
  for (;;) {
    if (expectValue) {
      if (depth > 0 && arrays[depth - 1] === 1 && ++itemCount > items && fault === null) {
        fault = { kind: "too_many_items", path: pathAt(Math.min(depth, max + 1) - 1) };
      }
      const c = text.charCodeAt(i);
      if (c === 0x7b || c === 0x5b) {
        depth++;
        arrays[depth - 1] = c === 0x5b ? 1 : 0;
        if (depth <= max) {
          indexes[depth - 1] = 0;
          members[depth - 1] = 0;
        } else if (tooDeep === null) {
          tooDeep = pathAt(depth - 1);
          fault ??= { kind: "too_deep", path: tooDeep };
        }
        i++;
        ws();
        if (text.charCodeAt(i) === (c === 0x7b ? 0x7d : 0x5d)) {
          i++;
          depth--;
          expectValue = false;
        } else if (c === 0x7b && !key()) {
          return { valid: false };
        }
        continue;
      }
      let end: number;
      if (c === 0x22) end = skipString(text, i);
      else if (c === 0x2d || isDigit(c)) {
        end = skipNumber(text, i);
        if (exactNumbers && end > 0 && fault === null && depth <= max && !isExactNumber(text, i, end)) {
          fault = { kind: "inexact_number", path: pathAt(depth) };
        }
      } else if (text.startsWith("true", i)) end = i + 4;
      else if (text.startsWith("false", i)) end = i + 5;
      else if (text.startsWith("null", i)) end = i + 4;
      else end = -1;
      if (end < 0) return { valid: false };
      i = end;
      expectValue = false;
      continue;
    }
    // After a value: the end of the text, or a comma or the close of the container it is in.
    ws();
    if (depth === 0) {
      if (i !== n) return { valid: false };
      break;
    }
    const c = text.charCodeAt(i);
    const inArray = arrays[depth - 1] === 1;
    if (c === 0x2c) {
      i++;
      ws();
      if (!inArray) {
        if (!key()) return { valid: false };
      } else if (depth <= max) {
        indexes[depth - 1] += 1;
      }
      expectValue = true;
    } else if (c === (inArray ? 0x5d : 0x7d)) {
      i++;
      depth--;
    } else {
      return { valid: false };
    }
  }
  return { valid: true, tooDeep, fault };
}

/**
 * The first fault of a JSON value in the order of its text: an object or array at a level deeper
 * than `max` (the value itself is at `level`, 1 by default), or a string or key that is not
 * well-formed Unicode (a key's path is that of the member it names). A depth-first walk over an
 * explicit stack of open containers with a cursor each (no recursion, nothing allocated per value
 * but objects' key lists); it never looks below level `max` + 1 and stops at the first fault.
 */
export function findJsonFault(
  value: unknown,
  opts: { max?: number; level?: number; depth?: boolean; text?: boolean } = {},
): JsonFault | null {
  const max = opts.max ?? MAX_JSON_DEPTH;
  const checkDepth = opts.depth ?? true;
  const checkText = opts.text ?? true;
  const base = opts.level ?? 1;
  // Per open container: itself, its keys (objects) or null (arrays), and the next member's index.
  const containers: object[] = [];
  const keyLists: (string[] | null)[] = [];
  const cursors: number[] = [];
  /** The path to the member the top container's cursor has just passed. */
  const pathTo = (): PathSegment[] => {
    const path: PathSegment[] = [];
    for (let j = 0; j < containers.length; j++) {
      const keys = keyLists[j];
      path.push(keys === null ? cursors[j] - 1 : keys[cursors[j] - 1]);
    }
    return path;
  };
  /** Checks a value about to be entered at `level`; answers a fault, or pushes it if it is a container. */
  const enter = (v: unknown, level: number, path: () => PathSegment[]): JsonFault | null => {
    if (typeof v === "string") return checkText && !v.isWellFormed() ? { kind: "not_well_formed", path: path() } : null;
    if (v === null || typeof v !== "object") return null;
    if (checkDepth && level > max) return { kind: "too_deep", path: path() };
    containers.push(v);
    keyLists.push(Array.isArray(v) ? null : Object.keys(v));
    cursors.push(0);
    return null;
  };
  const first = enter(value, base, () => []);
  if (first) return first;
  while (containers.length > 0) {
    const top = containers.length - 1;
    const container = containers[top];
    const keys = keyLists[top];
    const i = cursors[top];
    if (i >= (keys === null ? (container as unknown[]).length : keys.length)) {
      containers.pop();
      keyLists.pop();
      cursors.pop();
      continue;
    }
    cursors[top] = i + 1;
    let child: unknown;
    if (keys === null) {
      child = (container as unknown[])[i];
    } else {
      const key = keys[i];
      if (checkText && !key.isWellFormed()) return { kind: "not_well_formed", path: pathTo(), key: true };
      child = (container as Record<string, unknown>)[key];
    }
    // Scalars other than strings are passed over without a call.
    if (child === null || (typeof child !== "object" && typeof child !== "string")) continue;
    const fault = enter(child, base + top + 1, pathTo);
    if (fault) return fault;
  }
  return null;
}

const isHexAt = (text: string, i: number) => isHex(text.charCodeAt(i));
/** A `\uDC00`–`\uDFFF` escape at i (whose backslash is known to be a real one). */
const lowEscapeAt = (text: string, i: number): boolean =>
  text.charCodeAt(i) === 0x5c &&
  text.charCodeAt(i + 1) === 0x75 &&
  (text.charCodeAt(i + 2) | 0x20) === 0x64 &&
  (text.charCodeAt(i + 3) | 0x20) >= 0x63 &&
  (text.charCodeAt(i + 3) | 0x20) <= 0x66 &&
  isHexAt(text, i + 4) &&
  isHexAt(text, i + 5);

/**
 * Whether a JSON text escapes a lone UTF-16 surrogate: a `\uD800`–`\uDBFF` escape not followed by
 * a `\uDC00`–`\uDFFF` one, or the latter not preceded by the former. Escapes of surrogate pairs,
 * which clients such as Python's json.dumps write for every character beyond U+FFFF, are fine. A
 * regular expression finds the candidates (none in most texts); `\\uD800` is an escaped backslash
 * and text, and is passed over.
 */
export function escapesLoneSurrogate(text: string): boolean {
  const candidates = new RegExp(SURROGATE_ESCAPES);
  while (candidates.test(text)) {
    const at = candidates.lastIndex - 6;
    let k = at - 1;
    while (text.charCodeAt(k) === 0x5c) k--;
    if ((at - 1 - k) % 2 === 1) continue; // the backslash is escaped: "\\uD800" is text
    const second = text.charCodeAt(at + 3) | 0x20;
    const high = second === 0x38 || second === 0x39 || second === 0x61 || second === 0x62;
    // A low one here was not taken by a high one just before it.
    if (!high || !lowEscapeAt(text, at + 6)) return true;
    candidates.lastIndex = at + 12;
  }
  return false;
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
    value = JSON.parse(text);
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
