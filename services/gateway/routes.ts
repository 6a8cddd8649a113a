import type { ScopeName } from "../../shared/scopes";

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE";

/** One public endpoint: the whole `/v1` surface, with the scope each needs, reads on one screen. */
export interface RouteDef {
  method: HttpMethod;
  /** Path template under /v1 as the docs write it, e.g. `/api-keys/{id}`. */
  path: string;
  action: string;
  scope: ScopeName;
  /** 201 for creations; 200 otherwise. */
  status?: 201;
  /** The action answers a `ListResult` that becomes `{data, meta}`. */
  list?: true;
}

export const ROUTES: readonly RouteDef[] = [
  { method: "GET", path: "/orgs/{id}", action: "orgs.get", scope: "org:admin" },
  { method: "PATCH", path: "/orgs/{id}", action: "orgs.update", scope: "org:admin" },
  { method: "GET", path: "/orgs/{id}/environments", action: "orgs.environments", scope: "org:admin", list: true },
  { method: "GET", path: "/orgs/{id}/members", action: "orgs.listMembers", scope: "org:admin", list: true },
  { method: "POST", path: "/orgs/{id}/members", action: "orgs.addMember", scope: "org:admin", status: 201 },
  { method: "PATCH", path: "/orgs/{id}/members/{member_id}", action: "orgs.updateMember", scope: "org:admin" },
  { method: "DELETE", path: "/orgs/{id}/members/{member_id}", action: "orgs.removeMember", scope: "org:admin" },

  { method: "POST", path: "/api-keys", action: "keys.create", scope: "api-keys:write", status: 201 },
  { method: "GET", path: "/api-keys", action: "keys.list", scope: "api-keys:read", list: true },
  { method: "GET", path: "/api-keys/{id}", action: "keys.get", scope: "api-keys:read" },
  { method: "DELETE", path: "/api-keys/{id}", action: "keys.revoke", scope: "api-keys:write" },
];

export const ROUTE_BY_ACTION = new Map(ROUTES.map((r) => [r.action, r]));

/** The path parameters of a route (`/orgs/{id}/members/{member_id}` → id, member_id). */
export const pathParamsOf = (route: RouteDef): string[] => [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);

/** moleculer-web aliases (`"GET /api-keys/:id": "keys.get"`) from the table. */
export function aliasesOf(routes: readonly RouteDef[]): Record<string, string> {
  return Object.fromEntries(routes.map((r) => [`${r.method} ${r.path.replace(/\{(\w+)\}/g, ":$1")}`, r.action]));
}

const templates = ROUTES.map((r) => ({
  method: r.method,
  pattern: new RegExp(`^${r.path.replace(/\{\w+\}/g, "[^/]+")}/?$`),
}));

/** The methods a path answers to: none is a 404, some but not the one asked is a 405. */
export function methodsFor(path: string): HttpMethod[] {
  return [...new Set(templates.filter((t) => t.pattern.test(path)).map((t) => t.method))];
}
