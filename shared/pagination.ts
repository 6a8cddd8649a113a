import type { Collection, Doc, Filter, Scope } from "./storage/types";

/** The list rules of every endpoint: `page` ≥ 1 (default 1), `per_page` 1..100 (default 20). */
export const DEFAULT_PER_PAGE = 20;
export const MAX_PER_PAGE = 100;

export const pageParams = {
  page: { type: "number", integer: true, min: 1, optional: true, convert: true, default: 1 },
  per_page: { type: "number", integer: true, min: 1, max: MAX_PER_PAGE, optional: true, convert: true, default: DEFAULT_PER_PAGE },
} as const;

export interface PageParams {
  page: number;
  per_page: number;
}

/** What a list action returns; the gateway turns it into `{data, meta: {total, page, per_page}}`. */
export interface ListResult<T> {
  items: T[];
  total: number;
  page: number;
  per_page: number;
}

export const skipOf = (p: PageParams): number => (p.page - 1) * p.per_page;

/**
 * One page of a list endpoint, newest first (ids are time-ordered), with each document turned
 * into its public view.
 */
export async function newestFirst<T extends Doc, V>(
  collection: Collection<T>,
  scope: Scope,
  filter: Filter,
  params: PageParams,
  view: (doc: T) => V,
): Promise<ListResult<V>> {
  const { items, total } = await collection.page(scope, filter, { sort: { id: -1 }, skip: skipOf(params), limit: params.per_page });
  return { items: items.map(view), total, page: params.page, per_page: params.per_page };
}

/** A path id (`/things/{id}`): its shape is checked by the lookup, which answers 404. */
export const idParam = { type: "string", min: 1, max: 100 } as const;
export const idParams = { $$strict: true, id: idParam } as const;
export interface IdParams {
  id: string;
}
