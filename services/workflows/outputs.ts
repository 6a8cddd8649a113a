import type { RunStep } from "../../shared/api/wire";

/**
 * Bounds on what a run stores of its steps' outputs, so one run cannot grow without limit (an
 * `http` step keeps its answer's body, and a run has up to 50 steps).
 *
 * - A step keeps its output when it is at most STEP_OUTPUT_MAX_BYTES as JSON (an `http` answer is
 *   read up to that size: a longer one cannot be kept whole), and while the run's outputs together
 *   stay within RUN_OUTPUTS_MAX_BYTES. A run's page crosses the broker in a cluster, and NATS
 *   refuses messages over 1 MiB (nats-server's default max_payload): the outputs' budget leaves
 *   room for the input (64 KiB) and the rest of the run.
 * - Otherwise the output is stored as a marker, `{"truncated": true, "size": n, "preview": "…"}`
 *   (and the `status_code` of an `http` answer): `size` is the length in bytes of what was left out
 *   (an answer's body as received when it was cut while read, else as JSON), `preview` its start
 *   (at most PREVIEW_MAX_BYTES once written as JSON; a text body is previewed as its text). The marker sits at the level of the output, where the engine alone
 *   writes keys (a server's answer is under `body`), so it cannot be forged by an answer.
 * - Outputs of up to ALWAYS_KEPT_BYTES are kept whatever the run holds: a marker is no smaller.
 *   So a run's outputs take at most RUN_OUTPUTS_MAX_BYTES plus 50 small outputs or markers.
 * - A template that reads into a truncated output (`{{steps.call.output.body.id}}`, or the whole
 *   `{{steps.call.output}}`) fails its step, saying so; the marker's own fields (`status_code`,
 *   `truncated`, `size`, `preview`) can be read.
 */
export const STEP_OUTPUT_MAX_BYTES = 64 * 1024;
export const RUN_OUTPUTS_MAX_BYTES = 512 * 1024;
export const PREVIEW_MAX_BYTES = 1024;
export const ALWAYS_KEPT_BYTES = 2 * 1024;

export interface TruncatedOutput {
  status_code?: number;
  truncated: true;
  size: number;
  preview: string;
}

export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? "null");

export function isTruncated(output: unknown): output is TruncatedOutput {
  if (output === null || typeof output !== "object" || Array.isArray(output)) return false;
  const o = output as Record<string, unknown>;
  return o.truncated === true && typeof o.size === "number" && typeof o.preview === "string";
}

/**
 * The start of `text`: at most PREVIEW_MAX_BYTES once written as a JSON string (its quotes aside),
 * never ending in half a surrogate pair.
 */
export function previewOf(text: string): string {
  let preview = text.slice(0, PREVIEW_MAX_BYTES);
  for (;;) {
    if (/[\uD800-\uDBFF]$/.test(preview)) preview = preview.slice(0, -1);
    const bytes = jsonBytes(preview) - 2;
    if (bytes <= PREVIEW_MAX_BYTES) return preview;
    preview = preview.slice(0, Math.min(preview.length - 1, Math.floor((preview.length * PREVIEW_MAX_BYTES) / bytes)));
  }
}

const httpAnswer = (output: unknown): output is { status_code: number; body: unknown } =>
  output !== null &&
  typeof output === "object" &&
  typeof (output as { status_code?: unknown }).status_code === "number" &&
  "body" in output;

/** The marker for an `http` answer whose body (`text` as received, `bytes` long) was not kept whole. */
export const cutAnswer = (statusCode: number, text: string, bytes: number): TruncatedOutput => ({
  status_code: statusCode,
  truncated: true,
  size: bytes,
  preview: previewOf(text),
});

/** The marker that stands for `output` (an `http` answer keeps its status code; its body goes). */
export function truncatedOutput(output: unknown): TruncatedOutput {
  if (httpAnswer(output)) {
    const text = typeof output.body === "string" ? output.body : (JSON.stringify(output.body) ?? "null");
    return cutAnswer(output.status_code, text, Buffer.byteLength(text));
  }
  const text = JSON.stringify(output) ?? "null";
  return { truncated: true, size: Buffer.byteLength(text), preview: previewOf(text) };
}

/** Bytes, as JSON, of the outputs of a run's steps other than `except`. */
export const outputsBytes = (steps: readonly RunStep[], except: number): number =>
  steps.reduce((sum, step, i) => (i === except || step.output === null ? sum : sum + jsonBytes(step.output)), 0);

/** What a step stores of `output`, given the bytes the run's other outputs already take. */
export function boundedOutput(output: unknown, others: number): unknown {
  if (isTruncated(output)) return output;
  const size = jsonBytes(output);
  if (size <= ALWAYS_KEPT_BYTES || (size <= STEP_OUTPUT_MAX_BYTES && others + size <= RUN_OUTPUTS_MAX_BYTES)) return output;
  return truncatedOutput(output);
}

/** A template that cannot be filled; the step fails with this message (retrying would not help). */
export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TemplateError";
  }
}

const MARKER_FIELDS: ReadonlySet<string> = new Set(["status_code", "truncated", "size", "preview"]);

/**
 * Throws when `{{expression}}` reads into the truncated output of step `stepId` (`rest`: the path
 * after `output`); reading the marker's own fields is allowed.
 */
export function checkReadable(output: unknown, stepId: string, rest: readonly string[], expression: string): void {
  if (!isTruncated(output)) return;
  if (rest.length > 0 && MARKER_FIELDS.has(rest[0])) return;
  throw new TemplateError(
    `{{${expression.trim()}}} reads the output of step '${stepId}', which was not stored whole (${output.size} bytes; a step keeps ` +
      `${STEP_OUTPUT_MAX_BYTES / 1024} KiB and a run ${RUN_OUTPUTS_MAX_BYTES / 1024} KiB of outputs): only its status_code, truncated, size and preview can be read`,
  );
}

/** `text` as a pattern matching itself. */
const literal = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");

/**
 * `value` with every occurrence of a secret's value (in its strings and keys), in any letter case
 * (a host name comes back lower-cased), replaced by `[redacted:NAME]`: what a step stores of an
 * answer that echoed a secret it sent. Longer values first, so a secret that holds another is
 * replaced whole. The forms a server may echo it in otherwise (encoded, escaped, cut) are not
 * found: the engine's own words never quote a filled value (step-errors.ts).
 */
export function redact<T>(value: T, secrets: Record<string, string>): T {
  const pairs = Object.entries(secrets)
    .filter(([, v]) => v.length > 0)
    .sort((a, b) => b[1].length - a[1].length);
  if (pairs.length === 0) return value;
  const pattern = new RegExp(pairs.map(([, v]) => literal(v)).join("|"), "gi");
  const nameOf = (found: string): string =>
    pairs.find(([, v]) => v === found)?.[0] ?? pairs.find(([, v]) => new RegExp(`^${literal(v)}$`, "i").test(found))?.[0] ?? "secret";
  const text = (s: string): string => s.replace(pattern, (found) => `[redacted:${nameOf(found)}]`);
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return text(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [text(k), walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/**
 * An http attempt's output with every secret's value redacted from what the server sent (its
 * `body`, or a cut answer's `preview`); the fields the engine writes (`status_code`, `truncated`,
 * `size`) stay as they are, so `{{steps.x.output.status_code}}` reads them whatever a value is.
 */
export function redactAnswer(output: unknown, secrets: Record<string, string>): unknown {
  if (output === null || typeof output !== "object" || Array.isArray(output)) return redact(output, secrets);
  const fields = output as Record<string, unknown>;
  return {
    ...fields,
    ...("body" in fields && { body: redact(fields.body, secrets) }),
    ...(typeof fields.preview === "string" && { preview: redact(fields.preview, secrets) }),
  };
}
