import { randomBytes } from "node:crypto";
import { ApiError, notOneOf } from "../../shared/errors";
import { API_KEY_SECRET_LENGTH, apiKeyPrefix, digestOf } from "../../shared/api/identity";
import { ADMIN_SCOPE, grants, isScopeName, SCOPE_NAMES, type ScopeName } from "../../shared/api/scopes";
import type { Environment } from "../../shared/storage/types";
import type { ApiKey, KeyStatus } from "../../shared/api/wire";

export type { KeyStatus } from "../../shared/api/wire";

/** A key as stored: the secret itself is never kept, only its SHA-256 digest. */
export interface KeyDoc extends Omit<ApiKey, "object" | "status" | "revoked_by"> {
  revoked_by?: ApiKey["revoked_by"];
  org_id: string;
  digest: string;
  /** Stored: revoked or not; `expired` is worked out when shown (statusOf). */
  status: "active" | "revoked";
}

export type KeyView = ApiKey;

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** 32 base62 characters (~190 bits) drawn without modulo bias. */
function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export function generateKey(environment: Environment): { key: string; digest: string; prefix: string; last4: string } {
  const key = `${apiKeyPrefix(environment)}${randomBase62(API_KEY_SECRET_LENGTH)}`;
  return { key, digest: digestOf(key), prefix: key.slice(0, apiKeyPrefix(environment).length + 4), last4: key.slice(-4) };
}

export function statusOf(doc: Pick<KeyDoc, "status" | "expires_at">, now = Date.now()): KeyStatus {
  if (doc.status === "revoked") return "revoked";
  if (doc.expires_at !== null && Date.parse(doc.expires_at) <= now) return "expired";
  return "active";
}

export function viewOf(doc: KeyDoc, now = Date.now()): KeyView {
  return {
    object: "api_key",
    id: doc.id,
    name: doc.name,
    environment: doc.environment,
    scopes: doc.scopes,
    status: statusOf(doc, now),
    prefix: doc.prefix,
    last4: doc.last4,
    created_at: doc.created_at,
    revoked_at: doc.revoked_at,
    revoked_by: doc.revoked_by ?? null,
    expires_at: doc.expires_at,
    last_used_at: doc.last_used_at,
  };
}

/**
 * A key may only hand out what it holds: every requested scope must be held by the caller, and
 * `org:admin` (which holds everything) is the only way to grant `org:admin` or to create a key for
 * the other environment.
 */
export function checkGrantable(
  caller: { scopes: readonly string[]; environment: Environment },
  requested: readonly string[],
  environment: Environment,
): ScopeName[] {
  const scopes = [...new Set(requested)];
  for (const [i, scope] of scopes.entries()) {
    if (!isScopeName(scope)) {
      throw notOneOf(`scopes[${i}]`, SCOPE_NAMES, scope);
    }
    if (!grants(caller.scopes, scope)) {
      throw new ApiError("insufficient_scope", `Your key does not hold '${scope}', so it cannot grant it`, {
        param: `scopes[${i}]`,
        scope,
      });
    }
  }
  // Sandbox keys never reach live data (as Stripe's test keys never touch live mode): not even an
  // org:admin test key may mint a live key. A live org:admin key may create test keys.
  if (environment === "live" && caller.environment === "test") {
    throw new ApiError(
      "insufficient_scope",
      "A test key cannot create live keys: sandbox keys never reach live data; use a live org:admin key",
      {
        param: "environment",
        scope: ADMIN_SCOPE,
      },
    );
  }
  if (environment !== caller.environment && !caller.scopes.includes(ADMIN_SCOPE)) {
    throw new ApiError("insufficient_scope", `Creating a key for the ${environment} environment needs 'org:admin'`, {
      param: "environment",
      scope: ADMIN_SCOPE,
    });
  }
  return scopes as ScopeName[];
}

/**
 * The new key's expiry, checked. A caller whose own key expires (`callerExpiresAt`) cannot mint a
 * key that outlives it: it must give an `expires_at` no later than its own.
 */
export function checkExpiry(expiresAt: string | null | undefined, now = Date.now(), callerExpiresAt: string | null = null): string | null {
  if (expiresAt === undefined || expiresAt === null) {
    if (callerExpiresAt !== null) {
      throw new ApiError(
        "parameter_invalid",
        `expires_at is required: your key expires at ${callerExpiresAt}, and a key it creates cannot outlive it`,
        { param: "expires_at" },
      );
    }
    return null;
  }
  const at = Date.parse(expiresAt);
  if (Number.isNaN(at) || !/^\d{4}-\d{2}-\d{2}T/.test(expiresAt)) {
    throw new ApiError("parameter_invalid", "expires_at must be an ISO 8601 timestamp", { param: "expires_at" });
  }
  if (at <= now) throw new ApiError("parameter_invalid", "expires_at must be in the future", { param: "expires_at" });
  if (callerExpiresAt !== null && at > Date.parse(callerExpiresAt)) {
    throw new ApiError(
      "parameter_invalid",
      `expires_at must be no later than your own key's expiry (${callerExpiresAt}): a key cannot create a key that outlives it`,
      { param: "expires_at" },
    );
  }
  return new Date(at).toISOString();
}

/**
 * Revoking takes at least what the key grants: every scope it holds, or org:admin (a key with
 * `api-keys:write` alone cannot revoke an org:admin key, as a Stripe restricted key cannot manage
 * keys stronger than itself).
 */
export function checkRevocable(caller: { scopes: readonly string[] }, target: Pick<KeyDoc, "id" | "scopes">): void {
  const missing = target.scopes.find((scope) => !grants(caller.scopes, scope));
  if (missing !== undefined) {
    throw new ApiError(
      "insufficient_scope",
      `Revoking ${target.id} needs every scope it holds or 'org:admin'; your key does not hold '${missing}'`,
      {
        param: "id",
        scope: missing,
      },
    );
  }
}
