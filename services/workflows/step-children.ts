import { echo, invalidParam } from "../../shared/errors";
import { cappedTotal, checkDepth, cursorOf, idBounded, skipOf, type ListResult, type PageParams } from "../../shared/api/pagination";
import type { Filter, FindOptions, ReadView, Tenant } from "../../shared/storage/types";
import type { RunDoc } from "./run-doc";
import { runView, type RunView } from "./run-view.logic";

/** A step's children in item order, each item's newest run first (a retried step starts a new run for an item). */
const ITEM_ORDER: FindOptions["sort"] = { "parent.index": 1, id: -1 };
const BACKWARDS: FindOptions["sort"] = { "parent.index": -1, id: 1 };

/**
 * GET /runs?parent_run_id=&step_id=: one step's children, read along the step-children index
 * (workflows.store.ts) in its order: `parent.index` ascending, then newest first. So a map's first
 * page is its items #0, #1, … and a parallel's its branches in the order written, however many
 * newer children the parent has. A cursor is a child's id: its item and id place it in that order.
 */
export async function stepChildren(
  runs: ReadView<RunDoc>,
  tenant: Tenant,
  filter: Filter & { "parent.run_id": string; "parent.step_id": string },
  params: PageParams,
): Promise<ListResult<RunView>> {
  const cursor = cursorOf(params);
  if (cursor === undefined) {
    checkDepth(params);
    const [items, total] = await Promise.all([
      runs.find(tenant, filter, { sort: ITEM_ORDER, skip: skipOf(params), limit: params.per_page }),
      cappedTotal(runs, tenant, filter),
    ]);
    return { items: items.map(runView), ...total, page: params.page, per_page: params.per_page };
  }
  const { limit, starting_after, ending_before } = cursor;
  const from = starting_after ?? ending_before;
  const at =
    from === undefined
      ? undefined
      : await placeOf(runs, tenant, filter, from, starting_after !== undefined ? "starting_after" : "ending_before");
  const [found, total] = await Promise.all([
    from === undefined || at === undefined
      ? runs.find(tenant, filter, { sort: ITEM_ORDER, limit: limit + 1 })
      : around(runs, tenant, filter, { id: from, index: at, forward: starting_after !== undefined, want: limit + 1 }),
    cappedTotal(runs, tenant, filter),
  ]);
  const items = found.slice(0, limit);
  if (ending_before !== undefined) items.reverse();
  return { items: items.map(runView), ...total, limit, has_more: found.length > limit };
}

/**
 * `want` children after (forward) or before the cursor's run in item order, nearest first: the rest
 * of its item, then the items after (or before) it.
 */
async function around(
  runs: ReadView<RunDoc>,
  tenant: Tenant,
  filter: Filter,
  at: { id: string; index: number; forward: boolean; want: number },
): Promise<RunDoc[]> {
  const { forward, want } = at;
  const same = await runs.find(
    tenant,
    { ...idBounded(filter, forward ? "$lt" : "$gt", at.id), "parent.index": at.index },
    { sort: { id: forward ? -1 : 1 }, limit: want },
  );
  if (same.length >= want) return same;
  const others = await runs.find(
    tenant,
    { ...filter, "parent.index": { [forward ? "$gt" : "$lt"]: at.index } },
    { sort: forward ? ITEM_ORDER : BACKWARDS, limit: want - same.length },
  );
  return [...same, ...others];
}

/** The item index of the cursor's run, which must be a child of the listed step. */
async function placeOf(runs: ReadView<RunDoc>, tenant: Tenant, filter: Filter, id: string, param: string): Promise<number> {
  const run = await runs.get(tenant, id);
  if (!run?.parent || run.parent.run_id !== filter["parent.run_id"] || run.parent.step_id !== filter["parent.step_id"])
    throw invalidParam(
      param,
      `${param} must be the id of a run in this list (a child of parent_run_id's step step_id); received ${echo(id)}`,
    );
  return run.parent.index;
}
