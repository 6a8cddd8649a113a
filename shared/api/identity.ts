import { createHash } from "node:crypto";
import type { Environment } from "../storage/types";

/**
 * The API key format, the one definition the keys service issues and the auth service checks:
 * `svc_<environment>_` and 32 base62 characters; stored only as its SHA-256 digest.
 */
export const API_KEY_SECRET_LENGTH = 32;
export const API_KEY_PATTERN = /^svc_(live|test)_[0-9A-Za-z]{32}$/;
export const apiKeyPrefix = (environment: Environment): string => `svc_${environment}_`;
export const digestOf = (token: string): string => createHash("sha256").update(token).digest("hex");

/** What a bearer token resolves to; gateways cache it and re-check status and expiry on every use. */
export interface Identity {
  key_id: string;
  key_name: string;
  org_id: string;
  environment: Environment;
  scopes: string[];
  status: "active" | "revoked";
  expires_at: string | null;
  /** The organization's pinned API version, used when a request sends no Service-Version. */
  api_version: string;
}

/**
 * How long a gateway keeps a resolved token. It bounds what a gateway that missed an invalidation
 * can serve from its cache, and how long the auth service keeps waiting for a gateway it lost.
 */
export const IDENTITY_TTL_MS = 30_000;

/** Broadcast to every gateway node before a revocation answers. */
export interface Invalidation {
  key_id?: string;
  org_id?: string;
}
