import { printable, printableBlock, printableJson } from "./printable.logic";

/**
 * What a command prints: JSON (one object per line, `--json`) or lines for people; notes and
 * warnings on stderr. Nothing reaches the terminal with a control character of a tenant's text
 * in it (printable.logic); the JSON parses back to the exact values.
 */
export interface Output {
  readonly json: boolean;
  /** One result: `value` as JSON, else `text` (or `value` pretty-printed). Build `text` with `safe`. */
  line(value: unknown, text?: string): void;
  /** What the command is doing (following a log, reconnecting): for people, on stderr. */
  info(message: string): void;
  /** Something the operator should act on, prefixed `warning:`, on stderr. */
  warn(message: string): void;
}

export function output(
  json: boolean,
  stdout: NodeJS.WritableStream = process.stdout,
  stderr: NodeJS.WritableStream = process.stderr,
): Output {
  return {
    json,
    line(value, text) {
      stdout.write(`${json ? printableJson(value) : printableBlock(text ?? printableJson(value, 2))}\n`);
    },
    info(message) {
      stderr.write(`${printableBlock(message)}\n`);
    },
    warn(message) {
      stderr.write(`warning: ${printableBlock(message)}\n`);
    },
  };
}

/** Rows as aligned columns, for people: each cell on one line, its control characters escaped. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cells = [columns, ...rows.map((r) => columns.map((c) => printable(Array.isArray(r[c]) ? r[c].join(",") : (r[c] ?? ""))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  return cells
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
