import { randomBytes } from "node:crypto";
import type { ServiceBroker } from "moleculer";

/**
 * What the gateway and the workflows service share about inbound webhooks (`POST /v1/hooks/{hook_id}`,
 * docs/inbound-webhooks.md): the hook id's form, the body limit, the media types taken, and the
 * broadcast that drops a hook from every workflows node's cache.
 */

/** `hk_` + 24 random bytes (192 bits) in base64url: the URL is unguessable, and anything else is refused unread. */
export const HOOK_ID_PATTERN = /^hk_[A-Za-z0-9_-]{32}$/;
export const newHookId = (): string => `hk_${randomBytes(24).toString("base64url")}`;
export const hookUrl = (id: string): string => `/v1/hooks/${id}`;

/** An inbound body becomes the run's input, which holds 64 KiB of JSON at most. */
export const HOOK_BODY_MAX_BYTES = 64 * 1024;

/** JSON (parsed for the run), and the text forms providers send (kept as text). */
const INBOUND_TYPE = /^(application\/([\w.+-]+\+)?json|application\/x-www-form-urlencoded|application\/xml|text\/[\w.+-]+)\s*(;.*)?$/i;
export const takesMediaType = (contentType: string | undefined): boolean => INBOUND_TYPE.test(contentType ?? "");
export const isJsonType = (contentType: string | undefined): boolean =>
  /^application\/([\w.+-]+\+)?json\s*(;.*)?$/i.test(contentType ?? "");

/** Broadcast to every workflows node: forget the hooks named (or every hook of a tenant whose secrets changed). */
export const HOOKS_CHANGED = "workflows.hooks.changed";
export interface HooksChanged {
  hook_ids?: string[];
  org_id?: string;
  environment?: string;
}

/** What the gateway hands the workflows service: the request as received, its body exactly as sent. */
export interface InboundRequest {
  hook_id: string;
  method: string;
  /** The query string without `?`, or "". */
  query: string;
  headers: Record<string, string>;
  /** The body's bytes as UTF-8 text (a body that is not UTF-8 is refused 415 by the gateway). */
  raw: string;
}

/** The answer to an inbound request: 202 a run started, 200 a duplicate (the first run) or a request the filter passed over. */
export interface HookReceipt {
  status: 200 | 202;
  run_id: string | null;
  duplicate: boolean;
  filtered: boolean;
}

/**
 * A request refused before anything is read for it: 401 `invalid_signature` (its signature does not
 * verify) or 404 `resource_not_found` (no such active hook). A value, not a thrown error: a flood of
 * forgeries or of made-up ids then builds no error object (and no stack trace) per request.
 */
export type HookRefusal =
  { status: 401; code: "invalid_signature"; message: string } | { status: 404; code: "resource_not_found"; message: string };
export const NO_HOOK: HookRefusal = { status: 404, code: "resource_not_found", message: "No such hook, or its workflow is inactive" };

/** A tenant's stored secrets changed: hooks verifying with one of them read it again. */
export function secretsChanged(broker: ServiceBroker, tenant: { org_id: string; environment: string }): void {
  const payload: HooksChanged = { org_id: tenant.org_id, environment: tenant.environment };
  broker.broadcast(HOOKS_CHANGED, payload, { groups: ["workflows"] }).catch(() => undefined);
}
