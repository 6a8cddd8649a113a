/** Organizations, their members and environments, API keys, and the audit log. */
import { SCOPE_NAMES } from "../scopes";
import { environment, idOf, type JsonSchema, nullable, object, objectTag, ref, refOrNull, REQUEST_ID, time } from "./common";

/** Organizations, members, environments, identities, scopes, keys and actors. */
export const ORG_RESOURCES: Record<string, JsonSchema> = {
  Organization: object("Organization", {
    object: objectTag("organization"),
    id: idOf("org"),
    name: { type: "string" },
    api_version: { type: "string" },
    created_at: time,
    updated_at: time,
  }),
  Environment: object("Environment", {
    object: objectTag("environment"),
    org_id: idOf("org"),
    id: environment,
    name: { type: "string" },
    description: { type: "string" },
  }),
  Member: object("Member", {
    object: objectTag("member"),
    id: idOf("mem"),
    org_id: idOf("org"),
    email: { type: "string", format: "email" },
    role: { type: "string", enum: ["owner", "admin", "developer", "viewer"] },
    role_changed_by: { ...refOrNull("Actor"), description: "Who last changed the role (null: never changed)" },
    role_changed_at: nullable(time),
    created_at: time,
    updated_at: time,
  }),
  Identity: object("Identity", {
    object: objectTag("identity"),
    org: object("IdentityOrg", { id: idOf("org"), name: { type: "string" } }),
    environment,
    api_key: object("IdentityKey", {
      id: idOf("key"),
      name: { type: "string" },
      prefix: { type: "string" },
      last4: { type: "string" },
      scopes: { type: "array", items: ref("Scope") },
      expires_at: nullable(time),
    }),
  }),
  Scope: { type: "string", enum: [...SCOPE_NAMES] },
  ApiKey: object("ApiKey", {
    object: objectTag("api_key"),
    id: idOf("key"),
    name: { type: "string" },
    environment,
    scopes: { type: "array", items: ref("Scope") },
    status: { type: "string", enum: ["active", "revoked", "expired"] },
    prefix: { type: "string", pattern: "^svc_(live|test)_", examples: ["svc_live_a1b2"] },
    last4: { type: "string", minLength: 4, maxLength: 4 },
    created_at: time,
    revoked_at: nullable(time),
    revoked_by: { ...refOrNull("Actor"), description: "The key that revoked it (null: not revoked, or revoked before the audit trail)" },
    expires_at: nullable(time),
    last_used_at: nullable(time),
  }),
  Actor: object(
    "Actor",
    { key_id: idOf("key"), key_name: { type: ["string", "null"], description: "The key's name then" } },
    [],
    "Who did something through the API: the key it used",
  ),
};

/** The audit log's entries. */
export const AUDIT_RESOURCES: Record<string, JsonSchema> = {
  AuditEntry: object(
    "AuditEntry",
    {
      object: objectTag("audit_entry"),
      id: idOf("aud"),
      environment: { ...environment, description: "The environment of the key that made the change" },
      actor: ref("Actor"),
      action: {
        type: "string",
        pattern: "^[a-z_]+\\.[a-z_]+$",
        examples: ["webhook.created"],
        description: "What was done: `<resource>.<verb>`",
      },
      method: { type: "string", enum: ["POST", "PATCH", "DELETE"] },
      route: { type: "string", examples: ["POST /webhooks/{id}/rotate-secret"], description: "The operation: method and path template" },
      resource: object("AuditResource", { type: { type: "string" }, id: { type: ["string", "null"] } }),
      request_id: REQUEST_ID,
      client_address: {
        type: "string",
        description: "The client's address as the gateway saw it (X-Forwarded-For's last with TRUST_PROXY)",
      },
      status: {
        type: "integer",
        minimum: 200,
        maximum: 599,
        description: "The status answered: 2xx, or 401 for a key that revoked itself",
      },
      created_at: time,
    },
    [],
    "One successful mutation made through the API: who, what, to which resource, from where and when",
  ),
};
