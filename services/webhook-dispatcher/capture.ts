import { ATTEMPT_RESPONSE_LIMITS, type AttemptRequest, type AttemptResponse } from "../../shared/api/wire";

/**
 * What an attempt keeps of the request it sent and the answer it got, for the delivery log: every
 * part bounded, so an attempt stays under ~16 KiB as stored whatever the receiver answers (URL ≤ 2 KiB,
 * request headers ~0.5 KiB, answer headers ≤ 4 KiB, answer body ≤ 4 KiB of text, 8 KiB if every
 * character needs a JSON escape, or 5.5 KiB as base64); typically 1-2 KiB.
 */

/** Headers derived from the signing secrets: never stored (a log reader must not get a valid signature). */
const SECRET_DERIVED = new Set(["service-signature", "webhook-signature"]);

/** Attempts of one delivery that keep their request and answer; later ones keep the summary only (redeliveries add 5 each). */
export const DETAILED_ATTEMPTS_MAX = 20;

export function requestOf(url: string, headers: Record<string, string>, body: string): AttemptRequest {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (!SECRET_DERIVED.has(name.toLowerCase())) kept[name] = value;
  return { method: "POST", url, headers: kept, body_bytes: Buffer.byteLength(body) };
}

/**
 * The answer as kept: at most ATTEMPT_RESPONSE_LIMITS.headers headers, each name and value cut to
 * their bounds and all of them to `headersChars`; the first `bodyBytes` of the body as UTF-8 text
 * (a character the cut split is left out), or as base64 when those bytes are not UTF-8.
 */
export function responseOf(headers: Record<string, string | string[] | undefined>, head: Buffer, bytes: number): AttemptResponse {
  const L = ATTEMPT_RESPONSE_LIMITS;
  const kept: Record<string, string> = {};
  let chars = 0;
  let omitted = 0;
  for (const [name, raw] of Object.entries(headers)) {
    if (raw === undefined) continue;
    const key = name.toLowerCase().slice(0, L.headerNameChars);
    const value = (Array.isArray(raw) ? raw.join(", ") : String(raw)).slice(0, L.headerValueChars);
    if (Object.keys(kept).length >= L.headers || chars + key.length + value.length > L.headersChars) {
      omitted += 1;
      continue;
    }
    kept[key] = value;
    chars += key.length + value.length;
  }
  const slice = head.subarray(0, L.bodyBytes);
  const text = utf8(slice, bytes > slice.length);
  return {
    headers: kept,
    ...(omitted > 0 && { headers_omitted: omitted }),
    body: text ?? slice.toString("base64"),
    body_encoding: text === null ? "base64" : "utf8",
    body_bytes: bytes,
    body_truncated: bytes > slice.length,
  };
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** Control characters other than tab and line ends: such a body is binary (and each would be 6 bytes as JSON). */
const isControl = (code: number): boolean => code < 0x20 && code !== 0x09 && code !== 0x0a && code !== 0x0d;
const hasControl = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) if (isControl(text.charCodeAt(i))) return true;
  return false;
};

/**
 * The bytes as text if they are UTF-8 without control characters; when `cut`, up to 3 trailing
 * bytes of a split character are dropped first.
 */
function utf8(bytes: Buffer, cut: boolean): string | null {
  // Printable ASCII (most answers: "ok", a small JSON): the text as it is; the decoder's per-call
  // cost outweighs the rest of an attempt's capture.
  let ascii = true;
  for (let i = 0; i < bytes.length && ascii; i++) {
    const b = bytes[i];
    ascii = b < 0x80 && !isControl(b);
  }
  if (ascii) return bytes.toString("latin1");
  for (let drop = 0; drop <= (cut ? 3 : 0) && drop <= bytes.length; drop++) {
    let text: string;
    try {
      text = decoder.decode(bytes.subarray(0, bytes.length - drop));
    } catch {
      continue; // not UTF-8 as it is: one byte fewer, if the end may be a split character
    }
    return hasControl(text) ? null : text;
  }
  return null;
}
