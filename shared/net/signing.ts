import { createHmac, createSecretKey, randomBytes, type KeyObject } from "node:crypto";
import { SECRET_PREFIX } from "../records/deliveries";

/**
 * The signatures every webhook delivery carries:
 * - the spec's `Service-Signature: sha256=<hex>`, HMAC-SHA256 of the exact body bytes keyed with the
 *   whole secret string (`whsec_…`) as UTF-8. During a rotation's overlap the header is a list,
 *   `sha256=<new>, sha256=<old>` (an HTTP list, as the header sent twice would read): a receiver
 *   accepts the delivery when any element matches, so one still verifying with the old secret and
 *   one already on the new both keep working (docs/decisions/0031-service-signature-rotation.md);
 * - the Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`), whose
 *   signed content `id.timestamp.body` binds the delivery id and time, so a receiver can refuse a
 *   replayed capture. Their key is the base64-decoded part of the secret after `whsec_`, as the
 *   standard's libraries expect; during a rotation the old secret signs beside the new one.
 */

/**
 * HMAC keys, made once per secret: building a key from a string on every signature costs more than
 * the HMAC of a small body. The spec's key is the secret's UTF-8 bytes; the standard's is the
 * base64-decoded part after `whsec_`.
 */
const keyCache = new Map<string, { service: KeyObject; standard: KeyObject }>();
function keysOf(secret: string): { service: KeyObject; standard: KeyObject } {
  let keys = keyCache.get(secret);
  if (!keys) {
    const standard = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64");
    keys = { service: createSecretKey(Buffer.from(secret, "utf8")), standard: createSecretKey(standard) };
    if (keyCache.size > 10_000) keyCache.clear();
    keyCache.set(secret, keys);
  }
  return keys;
}

/**
 * HMAC-SHA256 of `data` keyed as the spec's signature is (`utf8`: the secret's bytes, as GitHub and
 * Stripe key theirs) or as the standard's (`standard`: the base64 part after `whsec_`): what an
 * inbound webhook's verification recomputes.
 */
export function hmacSha256(secret: string, data: string, key: "utf8" | "standard"): Buffer {
  const keys = keysOf(secret);
  return createHmac("sha256", key === "utf8" ? keys.service : keys.standard)
    .update(data)
    .digest();
}

export function serviceSignature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", keysOf(secret).service).update(body).digest("hex")}`;
}

/** `Service-Signature`'s value: one `sha256=<hex>` per secret, the current first, comma-separated. */
export function serviceSignatures(secrets: readonly string[], body: string): string {
  return secrets.map((secret) => serviceSignature(secret, body)).join(", ");
}

export function standardSignature(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets
    .map((secret) => `v1,${createHmac("sha256", keysOf(secret).standard).update(`${id}.${timestamp}.${body}`).digest("base64")}`)
    .join(" ");
}

/** `whsec_` + 32 random bytes in base64: the Standard Webhooks secret format (webhooks' and workflows' signing secrets). */
export const generateSecret = (): string => `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`;

/** How long a rotated-out signing secret keeps signing beside the new one. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

/** The Standard Webhooks headers of one request: `id` names the message, the same on every retry of it. */
export function standardHeaders(id: string, body: string, secrets: readonly string[], nowMs = Date.now()): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": standardSignature(secrets, id, timestamp, body),
  };
}

/**
 * Every header of one delivery attempt. `secrets[0]` is the current secret; any others are rotated-out
 * secrets still inside their overlap window.
 */
export function deliveryHeaders(
  delivery: { id: string; event_type: string },
  body: string,
  secrets: readonly string[],
  nowMs = Date.now(),
): Record<string, string> {
  return {
    "content-type": "application/json",
    "user-agent": "wfp-webhooks/1",
    "service-event": delivery.event_type,
    "service-delivery": delivery.id,
    "service-signature": serviceSignatures(secrets, body),
    ...standardHeaders(delivery.id, body, secrets, nowMs),
  };
}
