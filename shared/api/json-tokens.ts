/** Tokens of a JSON text: reading strings and numbers, and whether a number is one a double holds exactly. */

export const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
export const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
export const isHex = (c: number) => isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);

export const isNumberChar = (c: number) => isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;

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

/** After the string token starting at `i` (a `"`), or -1 if it is not one. */
export function skipString(text: string, i: number): number {
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
export function skipNumber(text: string, i: number): number {
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
