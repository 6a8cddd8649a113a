import { echo, invalidParam } from "../errors";
import type { ReadView, Doc, Filter, Scope } from "../storage/types";
import type { CursorMeta, PageMeta } from "./wire";

/**
 * The list rules of every endpoint: `page` ≥ 1 (default 1), `per_page` 1..100 (default 20), or by
 * cursor: `starting_after` / `ending_before` (an id from the list) with `limit` 1..100.
 */
export const DEFAULT_PER_PAGE = 20;
export const MAX_PER_PAGE = 100;
/**
 * How far a list counts its matches and how deep `page` reaches, in items. Beyond it `meta.total`
 * is this number with `meta.total_capped: true`, and a client pages on by cursor: so no request
 * reads more than this many index entries, however much is stored.
 */
export const MAX_COUNTED = 10_000;

const size = { type: "number", integer: true, min: 1, max: MAX_PER_PAGE, optional: true, convert: true } as const;
const cursor = { type: "string", min: 1, max: 100, optional: true } as const;

/** The query parameters that are numbers: each must be plain decimal digits. */
export const PAGE_NUMBER_PARAMS = ["page", "per_page", "limit"] as const;

/**
 * Refuses `page=1e1`, `per_page=0x10`, ` 5`, `+5`, `5.0` or a repeated `page`: the validator's
 * conversion (`Number()`) would read them as numbers the client did not write.
 */
export function checkPageNumbers(query: Record<string, unknown>): void {
  for (const name of PAGE_NUMBER_PARAMS) {
    const value = query[name];
    if (value !== undefined && (typeof value !== "string" || !/^[0-9]+$/.test(value))) {
      throw invalidParam(name, `${name} must be a whole number written in decimal digits, e.g. ${name}=2; received ${echo(value)}`);
    }
  }
}

/**
 * Refuses a query that mixes the two ways of paging: `page` or `per_page` (by number) with
 * `starting_after`, `ending_before` or `limit` (by cursor), naming the by-number parameter. Checked
 * on the query as sent, since the validator gives `page` and `per_page` defaults.
 */
export function checkPagingMode(query: Record<string, unknown>): void {
  const byNumber = query.page !== undefined ? "page" : query.per_page !== undefined ? "per_page" : undefined;
  if (byNumber === undefined) return;
  const byCursor = ["starting_after", "ending_before", "limit"].find((name) => query[name] !== undefined);
  if (byCursor === undefined) return;
  throw invalidParam(
    byNumber,
    `${byNumber} cannot be combined with ${byCursor}: a list pages either by number (page, per_page) or by cursor (starting_after or ending_before, with limit)`,
  );
}

/** `page` and `per_page`: offset paging, as the spec fixes it (a list read so can drift under inserts; a cursor cannot). */
const offsetParams = {
  page: { type: "number", integer: true, min: 1, optional: true, convert: true, default: 1 },
  per_page: { ...size, default: DEFAULT_PER_PAGE },
} as const;

export const pageParams = { ...offsetParams, limit: size, starting_after: cursor, ending_before: cursor } as const;

export interface PageParams {
  page: number;
  per_page: number;
  limit?: number;
  starting_after?: string;
  ending_before?: string;
}

/**
 * What a list action returns; the gateway turns it into `{data: items, meta: {…the rest}}`: by page
 * `{total, page, per_page}`, by cursor `{total, limit, has_more}`, with `total_capped: true` added
 * when more than MAX_COUNTED match (`total` is then MAX_COUNTED).
 */
export interface ListResult<T> extends Partial<PageMeta>, Partial<CursorMeta> {
  items: T[];
  total: number;
}

export const skipOf = (p: Pick<PageParams, "page" | "per_page">): number => (p.page - 1) * p.per_page;

/** Refuses a page that lies past the first MAX_COUNTED items. */
export function checkDepth(p: Pick<PageParams, "page" | "per_page">): void {
  if (p.page * p.per_page > MAX_COUNTED) {
    throw invalidParam(
      "page",
      `Pages reach the first ${MAX_COUNTED} items (page × per_page ≤ ${MAX_COUNTED}); page further with starting_after, the id of the last item you have`,
    );
  }
}

/** The total of a list: exact up to MAX_COUNTED, counted through the filter's index and no further. */
export async function cappedTotal<T extends Doc>(
  collection: ReadView<T>,
  scope: Scope,
  filter: Filter,
): Promise<Pick<ListResult<T>, "total" | "total_capped">> {
  const n = await collection.count(scope, filter, { limit: MAX_COUNTED + 1 });
  return n > MAX_COUNTED ? { total: MAX_COUNTED, total_capped: true } : { total: n };
}

/** How a list is read by cursor: `limit` items after `starting_after` (or from the start), or before `ending_before`. */
export interface Cursor {
  limit: number;
  starting_after?: string;
  ending_before?: string;
}

/** The cursor a list's parameters ask for, or undefined when they page by number (`page`, `per_page`). */
export function cursorOf(params: PageParams): Cursor | undefined {
  const { starting_after, ending_before } = params;
  if (starting_after === undefined && ending_before === undefined && params.limit === undefined) return undefined;
  if (starting_after !== undefined && ending_before !== undefined)
    throw invalidParam("ending_before", "Send starting_after or ending_before, not both");
  if (params.page !== 1)
    throw invalidParam(
      "page",
      "page cannot be combined with starting_after, ending_before or limit: a list pages either by number or by cursor",
    );
  return { limit: params.limit ?? params.per_page, starting_after, ending_before };
}

/** The stored part of a list read in ascending key order: up to `n` items after a key (or from the start), or before one (nearest first). */
export interface KeyedTail<V> {
  after(key: string | undefined, n: number): Promise<V[]>;
  before(key: string, n: number): Promise<V[]>;
}

/**
 * A page by cursor of a list that is not newest first by id: `head` (held in memory, in its own
 * order), then what `tail` reads along its index in ascending key order. A cursor is the key of an
 * item; a key the head does not hold is a position in the tail, so the page is the same whatever
 * was inserted before it.
 */
export async function pageByKey<V>(
  head: readonly V[],
  keyOf: (item: V) => string,
  cursor: Cursor,
  tail?: KeyedTail<V>,
): Promise<{ items: V[]; limit: number; has_more: boolean }> {
  const { limit, starting_after, ending_before } = cursor;
  let found: V[];
  if (ending_before !== undefined) {
    const at = head.findIndex((item) => keyOf(item) === ending_before);
    const headBefore = head.slice(0, at < 0 ? head.length : at).reverse();
    const tailBefore = at < 0 && tail ? await tail.before(ending_before, limit + 1) : [];
    found = [...tailBefore, ...headBefore].slice(0, limit + 1);
    return { items: found.slice(0, limit).reverse(), limit, has_more: found.length > limit };
  }
  const at = starting_after === undefined ? -1 : head.findIndex((item) => keyOf(item) === starting_after);
  const headAfter = starting_after !== undefined && at < 0 ? [] : head.slice(at + 1, at + 2 + limit);
  const need = limit + 1 - headAfter.length;
  const tailAfter = need > 0 && tail ? await tail.after(at < 0 ? starting_after : undefined, need) : [];
  found = [...headAfter, ...tailAfter];
  return { items: found.slice(0, limit), limit, has_more: found.length > limit };
}

/**
 * One page of a list endpoint, newest first (ids are time-ordered), with each document turned
 * into its public view. Each read is bounded whatever is stored: the page (or the page after a
 * cursor) and a count that stops at MAX_COUNTED, both along the index the filter's fields and `id`
 * form (each list's collection declares it).
 */
export async function newestFirst<T extends Doc, V>(
  collection: ReadView<T>,
  scope: Scope,
  filter: Filter,
  params: PageParams,
  view: (doc: T) => V,
): Promise<ListResult<V>> {
  const cursor = cursorOf(params);
  if (cursor === undefined) {
    checkDepth(params);
    const [items, total] = await Promise.all([
      collection.find(scope, filter, { sort: { id: -1 }, skip: skipOf(params), limit: params.per_page }),
      cappedTotal(collection, scope, filter),
    ]);
    return { items: items.map(view), ...total, page: params.page, per_page: params.per_page };
  }
  const { limit, starting_after, ending_before } = cursor;
  // One more than asked: whether there is more in that direction.
  const [found, total] = await Promise.all([
    ending_before === undefined
      ? collection.find(scope, starting_after === undefined ? filter : idBounded(filter, "$lt", starting_after), {
          sort: { id: -1 },
          limit: limit + 1,
        })
      : collection.find(scope, idBounded(filter, "$gt", ending_before), { sort: { id: 1 }, limit: limit + 1 }),
    cappedTotal(collection, scope, filter),
  ]);
  const items = found.slice(0, limit);
  if (ending_before !== undefined) items.reverse();
  return { items: items.map(view), ...total, limit, has_more: found.length > limit };
}

/** The filter with `id` also below (`$lt`) or above (`$gt`) `cursor`, keeping a range the list's own filter puts on ids (a date range). */
export function idBounded(filter: Filter, op: "$lt" | "$gt", cursor: string): Filter {
  const own = filter.id;
  if (own === undefined) return { ...filter, id: { [op]: cursor } };
  if (typeof own !== "object" || own === null) return filter;
  const other = own[op];
  const tighter = typeof other === "string" && (op === "$lt" ? other < cursor : other > cursor) ? other : cursor;
  return { ...filter, id: { ...own, [op]: tighter } };
}

/** A path id (`/things/{id}`): its shape is checked by the lookup, which answers 404. */
export const idParam = { type: "string", min: 1, max: 100 } as const;
export const idParams = { $$strict: true, id: idParam } as const;
export interface IdParams {
  id: string;
}

/** The days of a month (1–12) of a year, proleptic Gregorian as ISO 8601 has it. */
function daysIn(year: number, month: number): number {
  // Day 0 of the next month is this one's last (setUTCFullYear: Date.UTC moves years 0–99 to 19xx).
  const last = new Date(0);
  last.setUTCFullYear(year, month, 0);
  return last.getUTCDate();
}

/**
 * Refuses a time that is not an ISO 8601 instant; answers it in ms. Date.parse takes any day up to
 * 31 in any month and rolls it over (February 30 would be March 2), so the day is checked too.
 */
export function instantOf(name: string, value: string): number {
  const ms = Date.parse(value);
  const date = /^(\d{4})-(\d{2})-(\d{2})T/.exec(value);
  if (date === null || Number.isNaN(ms) || Number(date[3]) > daysIn(Number(date[1]), Number(date[2])))
    throw invalidParam(name, `${name} must be an ISO 8601 time, e.g. 2026-01-31T12:00:00Z`);
  return ms;
}
