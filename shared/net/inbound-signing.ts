import { randomBytes } from "node:crypto";
import type { HookScheme, HookVerify } from "../api/wire";
import { hmacSha256, standardHeaders } from "./signing";

/**
 * The signature headers of a request to an inbound webhook (`POST /v1/hooks/{hook_id}`,
 * docs/inbound-webhooks.md), made as each provider makes them: what `hooks test` sends. Built on
 * the HMACs the platform verifies with (signing.ts), so the sender and the verifier key alike.
 */

/** The schemes signed here: every one a webhook trigger takes. */
export const SIGNED_SCHEMES: readonly HookScheme[] = ["standard_webhooks", "hmac_sha256", "stripe", "github", "none"];

export const isSignedScheme = (scheme: unknown): scheme is HookScheme => SIGNED_SCHEMES.includes(scheme as HookScheme);

/** A Standard Webhooks message id, as providers make them: `msg_` and 128 random bits. */
export const newMessageId = (): string => `msg_${randomBytes(16).toString("base64url")}`;

/**
 * The headers signing `raw` (the body's exact text) with `secret` under `verify`. `id`: the
 * Standard Webhooks message id (a fresh one when absent); `nowMs`: the signed time.
 */
export function inboundSignature(
  verify: HookVerify,
  secret: string,
  raw: string,
  options: { id?: string; nowMs?: number } = {},
): Record<string, string> {
  const nowMs = options.nowMs ?? Date.now();
  switch (verify.scheme) {
    case "none":
      return {};
    case "standard_webhooks":
      return standardHeaders(options.id ?? newMessageId(), raw, [secret], nowMs);
    case "stripe": {
      const t = Math.floor(nowMs / 1000);
      return { "stripe-signature": `t=${t},v1=${hmacSha256(secret, `${t}.${raw}`, "utf8").toString("hex")}` };
    }
    case "github":
      return { "x-hub-signature-256": `sha256=${hmacSha256(secret, raw, "utf8").toString("hex")}` };
    case "hmac_sha256": {
      const digest = hmacSha256(secret, raw, "utf8").toString(verify.encoding ?? "hex");
      return { [(verify.header ?? "x-signature").toLowerCase()]: `${verify.prefix ?? ""}${digest}` };
    }
  }
}
