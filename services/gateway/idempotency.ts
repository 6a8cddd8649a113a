import { createHash } from "node:crypto";
import { ApiError, isDuplicate } from "../../shared/errors";
import { nowIso } from "../../shared/ids";
import { ALL_TENANTS, type Collection, type Tenant } from "../../shared/storage/types";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_KEY_LENGTH = 255;

export interface IdempotencyDoc {
  id: string;
  org_id: string;
  environment: "live" | "test";
  idempotency_key: string;
  fingerprint: string;
  state: "pending" | "done";
  status: number | null;
  body: unknown;
  /** The field of `body.data` that held a secret and was not stored (replayed as null). */
  redacted?: string | null;
  created_at: string;
  expires_at: string;
}

export type Begin = { kind: "new"; id: string } | { kind: "replay"; status: number; body: unknown; redacted: string | null };

/**
 * JSON with every object's keys in sorted order: two bodies that parse to the same value (keys
 * reordered, spaces, `1.0` for `1`) write the same text.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** A query string with its parameters in name order (a name's repeated values keep their order). */
export function canonicalQuery(query: string | null): string {
  const params = new URLSearchParams(query ?? "");
  params.sort();
  return params.toString();
}

/**
 * What a replay must match: the calling API key, the method, the path, the query and the body,
 * compared as parsed values (canonicalJson, canonicalQuery), not as the bytes sent.
 * The key is part of it, so another key of the organization sending the same Idempotency-Key is
 * refused (409 idempotency_key_reused) and never sees the first key's answer.
 */
export const fingerprintOf = (keyId: string, method: string, path: string, query: string | null, body: unknown): string =>
  createHash("sha256")
    .update(`${keyId}\n${method} ${path}\n${canonicalQuery(query)}\n${canonicalJson(body ?? {})}`)
    .digest("hex");

/**
 * An answer as stored: the secrets a creation shows once (`data[field]`, for each field given that
 * it holds) replaced by null; `redacted` names them, comma-separated.
 */
export function withoutSecret(body: unknown, field: string | readonly string[] | undefined): { body: unknown; redacted: string | null } {
  const data = (body as { data?: Record<string, unknown> } | null)?.data;
  if (field === undefined || data === null || typeof data !== "object") return { body, redacted: null };
  const held = (typeof field === "string" ? [field] : field).filter((f) => f in data);
  if (held.length === 0) return { body, redacted: null };
  return { body: { ...(body as object), data: { ...data, ...Object.fromEntries(held.map((f) => [f, null])) } }, redacted: held.join(", ") };
}

/**
 * `Idempotency-Key` on a POST: the first request with a key claims it (a unique index decides
 * between racing gateways), later ones with the same body replay its stored response, and ones
 * with another body are refused. A claim abandoned by a crashed gateway is taken over after
 * `staleMs`.
 */
export class Idempotency {
  constructor(
    private readonly records: Collection<IdempotencyDoc>,
    private readonly staleMs: number,
  ) {}

  async begin(tenant: Required<Tenant>, key: string, fingerprint: string): Promise<Begin> {
    if (key.length === 0 || key.length > MAX_KEY_LENGTH) {
      throw new ApiError("parameter_invalid", `Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`, {
        param: "Idempotency-Key",
      });
    }
    const id = `${tenant.org_id}:${tenant.environment}:${createHash("sha256").update(key).digest("hex")}`;
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const now = Date.now();
      try {
        await this.records.insert({
          id,
          ...tenant,
          idempotency_key: key,
          fingerprint,
          state: "pending",
          status: null,
          body: null,
          created_at: nowIso(),
          expires_at: new Date(now + IDEMPOTENCY_TTL_MS).toISOString(),
        });
        return { kind: "new", id };
      } catch (err) {
        if (!isDuplicate(err)) throw err;
      }
      const existing = await this.records.get(tenant, id);
      if (!existing) continue;
      if (Date.parse(existing.expires_at) <= now) {
        await this.records.delete(tenant, { id, expires_at: existing.expires_at });
        continue;
      }
      if (existing.fingerprint !== fingerprint) {
        throw new ApiError(
          "idempotency_key_reused",
          "This Idempotency-Key was already used with a different request; use a new key for a new request",
          { param: "Idempotency-Key" },
        );
      }
      if (existing.state === "done")
        return { kind: "replay", status: existing.status ?? 200, body: existing.body, redacted: existing.redacted ?? null };
      if (Date.parse(existing.created_at) + this.staleMs > now) {
        throw new ApiError("idempotency_key_in_use", "A request with this Idempotency-Key is still being processed; retry later", {
          param: "Idempotency-Key",
          retry_after: 1,
        });
      }
      const taken = await this.records.update(
        tenant,
        { id, state: "pending", created_at: existing.created_at },
        {
          $set: { created_at: nowIso() },
        },
      );
      if (taken) return { kind: "new", id };
    }
    throw new ApiError("idempotency_key_in_use", "A request with this Idempotency-Key is still being processed; retry later", {
      param: "Idempotency-Key",
      retry_after: 1,
    });
  }

  /** Keeps the answer for replays; `secretField` names the field of `data` that must not be stored. */
  async complete(
    tenant: Required<Tenant>,
    id: string,
    status: number,
    body: unknown,
    secretField?: string | readonly string[],
  ): Promise<void> {
    const kept = withoutSecret(body, secretField);
    await this.records.update(
      tenant,
      { id, state: "pending" },
      { $set: { state: "done", status, body: kept.body, redacted: kept.redacted } },
    );
  }

  /** The request failed in a way worth retrying (5xx): free the key for the retry. */
  async abandon(tenant: Required<Tenant>, id: string): Promise<void> {
    await this.records.delete(tenant, { id, state: "pending" });
  }

  async prune(): Promise<number> {
    return this.records.deleteMany(ALL_TENANTS, { expires_at: { $lt: nowIso() } });
  }
}
