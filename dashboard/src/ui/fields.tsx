import { useState } from "preact/hooks";

/** A JSON text field: what was typed, and the parse error shown under it on submit. */
export function useJsonText(initial: string) {
  const [text, setText] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  return {
    text,
    setText,
    error,
    /** The parsed value, or undefined (and the error shown) when the text is not JSON. */
    parse(): unknown {
      try {
        const value: unknown = JSON.parse(text);
        setError(null);
        return value;
      } catch (err) {
        setError(`Not valid JSON: ${(err as Error).message}`);
        return undefined;
      }
    },
    /** The parsed value when it is a JSON object, or undefined (and the error shown). */
    parseObject(): Record<string, unknown> | undefined {
      try {
        const value: unknown = JSON.parse(text);
        if (typeof value !== "object" || value === null || Array.isArray(value)) {
          setError("Must be a JSON object ({…})");
          return undefined;
        }
        setError(null);
        return value as Record<string, unknown>;
      } catch (err) {
        setError(`Not valid JSON: ${(err as Error).message}`);
        return undefined;
      }
    },
  };
}

export function JsonField({
  label,
  name,
  rows,
  json,
  invalid,
}: {
  label: string;
  name: string;
  rows: number;
  json: ReturnType<typeof useJsonText>;
  invalid?: boolean;
}) {
  return (
    <label>
      {label}
      <textarea
        name={name}
        rows={rows}
        class="mono"
        spellcheck={false}
        value={json.text}
        onInput={(e) => json.setText(e.currentTarget.value)}
        aria-invalid={json.error !== null || invalid || undefined}
        aria-describedby={`${name}-error`}
      />
      {json.error && <small id={`${name}-error`}>{json.error}</small>}
    </label>
  );
}

/** A labelled select of a list's filter (or a window): `options` maps each value to its label. */
export function Choice<V extends string>({
  label,
  name,
  value,
  options,
  onChange,
}: {
  label: string;
  name: string;
  value: V;
  options: Record<V, string>;
  onChange(value: V): void;
}) {
  return (
    <label>
      {label}
      <select name={name} value={value} onChange={(e) => onChange(e.currentTarget.value as V)}>
        {(Object.keys(options) as V[]).map((v) => (
          <option key={v} value={v}>
            {options[v]}
          </option>
        ))}
      </select>
    </label>
  );
}

/** Status filter options: "All", then each status as the API names it. */
export const statusOptions = <S extends string>(statuses: readonly S[]): Record<"all" | S, string> =>
  Object.fromEntries([["all", "All"], ...statuses.map((s) => [s, s])]) as Record<"all" | S, string>;
