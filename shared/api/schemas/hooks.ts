/** Inbound webhooks: the trigger, the hook as a workflow shows it, and the answers of POST /hooks/{hook_id}. */
import { HOOK_ID_PATTERN } from "../hooks";
import { HOOK_REQUEST_OUTCOMES } from "../wire";
import { idOf, nullable, object, objectTag, ref, time, withSecret, type JsonSchema } from "./common";

const HEADER_NAME = { type: "string", pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$", examples: ["webhook-id"] } as const;
const hookId = { type: "string", pattern: HOOK_ID_PATTERN.source, examples: ["hk_Zk3p0c9WmQ2rT8vX1yB4nD6fH7jL5sA0"] } as const;
const count = { type: "integer", minimum: 0 } as const;
const secret = {
  type: "string",
  pattern: "^\\{\\{ ?secrets\\.[A-Za-z][A-Za-z0-9_]{0,63} ?\\}\\}$",
  description: "A stored secret as {{secrets.NAME}}; absent: the platform makes one, shown once",
} as const;
const tolerance_s = {
  type: "integer",
  minimum: 1,
  maximum: 86400,
  description: "How far the signed timestamp may be from now, in seconds (default 300)",
} as const;

export const HOOK_RESOURCES: Record<string, JsonSchema> = {
  HookVerify: {
    oneOf: [
      object("StandardWebhooksVerify", { scheme: { const: "standard_webhooks" }, secret, tolerance_s }, ["secret", "tolerance_s"]),
      object(
        "HmacSha256Verify",
        {
          scheme: { const: "hmac_sha256" },
          secret,
          header: { ...HEADER_NAME, description: "The header holding the signature (default x-signature)" },
          prefix: {
            type: "string",
            pattern: "^[\\x21-\\x7e]{0,50}$",
            description: 'Text before the digest, such as "sha256=" (default none)',
          },
          encoding: { type: "string", enum: ["hex", "base64"], description: "The digest's encoding (default hex)" },
        },
        ["secret", "header", "prefix", "encoding"],
      ),
      object("StripeVerify", { scheme: { const: "stripe" }, secret, tolerance_s }, ["secret", "tolerance_s"]),
      object("GithubVerify", { scheme: { const: "github" }, secret }, ["secret"]),
      object("NoVerify", { scheme: { const: "none" } }, [], "No signature: anyone who knows the URL starts runs (must be said)"),
    ],
  },
  WebhookTrigger: object(
    "WebhookTrigger",
    {
      type: { const: "webhook" },
      verify: ref("HookVerify"),
      dedupe: object("HookDedupe", { header: HEADER_NAME }),
      filter: { type: "string", maxLength: 2004, description: "A CEL condition over `request`: only requests it passes start a run" },
      headers: {
        type: "array",
        maxItems: 20,
        items: HEADER_NAME,
        description: "Request headers the run's input keeps beside the default ones",
      },
    },
    ["dedupe", "filter", "headers"],
  ),
  Hook: object(
    "Hook",
    {
      id: hookId,
      url: {
        type: "string",
        description: "The path to POST to, under the server's address",
        examples: ["/v1/hooks/hk_Zk3p0c9WmQ2rT8vX1yB4nD6fH7jL5sA0"],
      },
      secret_source: { type: ["string", "null"], description: "`generated`, `secrets.NAME`, or null for scheme none" },
      previous_secret_expires_at: { ...nullable(time), description: "Until when the secret a rotation replaced is still accepted" },
      accepted: count,
      filtered: count,
      duplicates: count,
      refused: { ...count, description: "Requests refused 401 (counted every second or so)" },
      last_accepted_at: nullable(time),
      last_refused_at: nullable(time),
      last_refused_reason: { type: ["string", "null"], examples: ["bad_signature"] },
    },
    [],
    "A webhook trigger's hook: where to send, and what it received",
  ),
  HookReceipt: object(
    "HookReceipt",
    {
      object: objectTag("hook_receipt"),
      run_id: {
        type: ["string", "null"],
        description: "The run started (202) or started by the first of duplicates (200); null when the filter passed over it",
      },
      duplicate: { type: "boolean" },
      filtered: { type: "boolean" },
    },
    [],
    "The answer to an inbound request",
  ),
  HookRequest: object(
    "HookRequest",
    {
      object: objectTag("hook_request"),
      id: idOf("hkr"),
      workflow_id: idOf("wf"),
      hook_id: hookId,
      outcome: { type: "string", enum: [...HOOK_REQUEST_OUTCOMES] },
      status: { type: "integer", enum: [200, 202, 401], description: "The HTTP status it was answered" },
      run_id: { ...nullable(idOf("run")), description: "The run it started, or the first run of its dedupe key (duplicate)" },
      reason: { type: ["string", "null"], examples: ["bad_signature"], description: "Why it was refused" },
      request_id: { type: ["string", "null"], description: "The X-Request-Id it was answered with" },
      received_at: time,
    },
    [],
    "One of a hook's recent requests: the newest 100 of a workflow are kept (refusals: at most 10 per hook and second)",
  ),
  WebhookRunTrigger: object("WebhookRunTrigger", {
    type: { const: "webhook" },
    hook_id: hookId,
    request_id: { type: "string" },
    dedupe_key: { type: ["string", "null"] },
  }),
};
HOOK_RESOURCES.HookWithSecret = withSecret(
  HOOK_RESOURCES.Hook,
  "HookWithSecret",
  "secret",
  "The hook's new secret: in this answer only (null in an idempotent replay of it)",
);
