/** Well-formed Unicode in JSON: lone surrogates escaped in a text, and a parsed value's faults (depth and text). */
import { MAX_JSON_DEPTH, type JsonFault, type PathSegment } from "./json-bounds";
import { isHex } from "./json-tokens";

/** `\uD800`–`\uDFFF` escapes in a JSON text (or text that looks like one, after an escaped backslash). */
const SURROGATE_ESCAPES = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g;

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
