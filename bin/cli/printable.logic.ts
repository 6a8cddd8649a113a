/**
 * Text for a terminal. What a tenant wrote (an organization's name, a key's name, a webhook's
 * description, a log message carrying one) reaches the operator's terminal, which obeys escape
 * sequences: ESC and CSI move the cursor and erase lines, OSC 52 writes the clipboard, a carriage
 * return or a bidi override rewrites what a row seems to say. Every such character is shown as an
 * escape (`\x1B`, `\u202E`) instead, so what is printed is what is stored, visibly.
 */

/**
 * C0 controls and DEL, C1 controls, the line and paragraph separators, and the bidi formatting
 * characters (marks, embeddings, overrides, isolates).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
/** The same, less the newline and the tab: for the CLI's own multi-line text. */
// eslint-disable-next-line no-control-regex -- as above
const UNSAFE_BUT_LAYOUT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;
/** What JSON.stringify leaves raw inside strings but a terminal acts on. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

const hex = (c: string, width: number) => c.codePointAt(0)!.toString(16).toUpperCase().padStart(width, "0");
const shown = (c: string) => (c.codePointAt(0)! < 0x100 ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`);

/** One value inside a line (a table cell, a name): every control character escaped, newlines too. */
export function printable(value: unknown): string {
  return String(value ?? "").replace(UNSAFE, shown);
}

/** A whole block of the CLI's own text: its newlines and tabs stay, every other control character is escaped. */
export function printableBlock(text: string): string {
  return text.replace(UNSAFE_BUT_LAYOUT, shown);
}

/**
 * JSON for a terminal that parses back to exactly `value`: JSON.stringify already writes C0
 * controls as \u00XX; the characters it leaves raw are written as \uXXXX escapes too.
 */
export function printableJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).replace(UNSAFE_IN_JSON, (c) => `\\u${hex(c, 4)}`);
}

/** A template tag: the text as written, each interpolated value through `printable`. */
export function safe(strings: TemplateStringsArray, ...values: unknown[]): string {
  return strings.reduce((out, s, i) => out + s + (i < values.length ? printable(values[i]) : ""), "");
}
