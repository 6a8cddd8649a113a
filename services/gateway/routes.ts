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

const compiled = ROUTES.map((route) => ({
  route,
  names: [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]),
  pattern: new RegExp(`^${route.path.replace(/\{\w+\}/g, "([^/]+)")}/?$`),
}));

export type RouteMatch =
  | { route: RouteDef; params: Record<string, string> }
  | { route: undefined; allowed: HttpMethod[] };

/**
 * The route for a method and a path under /v1. No match at all is a 404; a path that exists for
 * other methods only is a 405 (`allowed` lists them).
 */
export function matchRoute(method: string, path: string): RouteMatch {
  const allowed: HttpMethod[] = [];
  for (const { route, names, pattern } of compiled) {
    const m = pattern.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      if (!allowed.includes(route.method)) allowed.push(route.method);
      continue;
    }
    const params: Record<string, string> = {};
    try {
      names.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1])));
    } catch {
      return { route: undefined, allowed: [] };
    }
    return { route, params };
  }
  return { route: undefined, allowed };
}
