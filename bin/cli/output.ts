/** What a command prints: JSON (one object per line, `--json`) or lines for people; warnings on stderr. */
export interface Output {
  readonly json: boolean;
  /** One result: `value` as JSON, else `text` (or `value` pretty-printed). */
  line(value: unknown, text?: string): void;
  warn(message: string): void;
}

export function output(json: boolean): Output {
  return {
    json,
    line(value, text) {
      process.stdout.write(`${json ? JSON.stringify(value) : (text ?? JSON.stringify(value, null, 2))}\n`);
    },
    warn(message) {
      process.stderr.write(`warning: ${message}\n`);
    },
  };
}

/** Rows as aligned columns, for people. */
export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cells = [columns, ...rows.map((r) => columns.map((c) => (Array.isArray(r[c]) ? r[c].join(",") : String(r[c] ?? ""))))];
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
