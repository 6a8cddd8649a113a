/** Reading a JSON text against its limits without building it: a fast count, and the slow path that names the fault. */
import { limitsOf, MAX_JSON_DEPTH, type JsonFault, type JsonLimits, type PathSegment } from "./json-bounds";
import { isDigit, isExactNumber, isNumberChar, isWs, skipNumber, skipString } from "./json-tokens";

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
