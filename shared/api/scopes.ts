/** The scopes a key can hold, and what each grants (the README's scope table mirrors this). */
export const SCOPES = {
  "workflows:read": "Read workflows and their runs",
  "workflows:write": "Create, update, delete, start, cancel and approve workflows and runs",
  "events:read": "List and retrieve events",
  "events:write": "Emit events",
  "api-keys:read": "List and retrieve API keys",
  "api-keys:write": "Create and revoke API keys",
  "webhooks:read": "Read webhooks and their deliveries",
  "webhooks:write": "Create, update, delete, rotate and redeliver webhooks",
  "analytics:read": "Read usage analytics",
  "secrets:read": "List secrets' names and metadata (never their values)",
  "secrets:write": "Create, replace and delete secrets",
  "org:admin": "Everything, including the organization, its members and environments",
} as const;

export type ScopeName = keyof typeof SCOPES;
export const SCOPE_NAMES = Object.keys(SCOPES) as ScopeName[];
export const ADMIN_SCOPE: ScopeName = "org:admin";

export const isScopeName = (value: unknown): value is ScopeName =>
  typeof value === "string" && Object.prototype.hasOwnProperty.call(SCOPES, value);

/** `org:admin` grants every scope; otherwise the exact scope must be held. */
export function grants(held: readonly string[], needed: ScopeName): boolean {
  return held.includes(needed) || held.includes(ADMIN_SCOPE);
}
