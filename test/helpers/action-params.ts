import type { ServiceSchema } from "moleculer";
import { SERVICE_SCHEMAS } from "../../services";
import { ROUTES, type RouteDef } from "../../services/gateway/routes";

export type Rule = Record<string, unknown> & { type?: string; optional?: boolean; nullable?: boolean; values?: unknown[]; items?: Rule };

const actionsOf = (schema: Partial<ServiceSchema<any, any, any>>): Record<string, unknown> =>
  Object.assign({}, ...[...(schema.mixins ?? [])].reverse().map(actionsOf), schema.actions);

const PARAMS = new Map<string, Record<string, Rule>>();
for (const schema of Object.values(SERVICE_SCHEMAS)) {
  for (const [name, action] of Object.entries(schema ? actionsOf(schema) : {})) {
    const params = (action as { params?: Record<string, Rule> } | undefined)?.params;
    if (params) PARAMS.set(`${schema!.name}.${name}`, params);
  }
}

export interface RouteField {
  route: RouteDef;
  /** `METHOD /path`, as the tests' tables name a route. */
  name: string;
  field: string;
  rule: Rule;
}

/** Every parameter of every public route that is not part of its path: the query's for GET, the body's otherwise. */
export function routeFields(): RouteField[] {
  // An inbound hook's action takes the raw request, not parameters a client names (test/api/hooks.test.ts).
  return ROUTES.filter((route) => !route.stream && !route.inbound).flatMap((route) => {
    const inPath = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const params = PARAMS.get(route.action) ?? {};
    return Object.entries(params)
      .filter(([field, rule]) => !field.startsWith("$$") && !inPath.includes(field) && typeof rule === "object")
      .map(([field, rule]) => ({ route, name: `${route.method} ${route.path}`, field, rule }));
  });
}

/** A route's path with every `{param}` filled in (validation comes before any lookup, so the ids need not exist). */
export const pathOf = (route: RouteDef): string =>
  route.path.replace(/\{(\w+)\}/g, (_, name: string) =>
    name === "id" && route.path.startsWith("/listen/") ? "ls_01jdx3aaaaaaaaaaaaaaaaaaaa" : `x_${name}`,
  );
