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
  const total = cappedTotal(runs, tenant, filter);
  const from = starting_after ?? ending_before;
  let found: RunDoc[];
  if (from === undefined) found = await runs.find(tenant, filter, { sort: ITEM_ORDER, limit: limit + 1 });
  else {
    const at = await placeOf(runs, tenant, filter, from, starting_after !== undefined ? "starting_after" : "ending_before");
    // The rest of the cursor's item, then the items after (or before) it: one more than asked, to tell whether there is more.
    const forward = starting_after !== undefined;
    const same = await runs.find(
      tenant,
      { ...idBounded(filter, forward ? "$lt" : "$gt", from), "parent.index": at },
      {
        sort: { id: forward ? -1 : 1 },
        limit: limit + 1,
      },
    );
    const others =
      same.length > limit
        ? []
        : await runs.find(
            tenant,
            { ...filter, "parent.index": { [forward ? "$gt" : "$lt"]: at } },
            {
              sort: forward ? ITEM_ORDER : BACKWARDS,
              limit: limit + 1 - same.length,
            },
          );
    found = [...same, ...others];
  }
  const items = found.slice(0, limit);
  if (ending_before !== undefined) items.reverse();
  return { items: items.map(runView), ...(await total), limit, has_more: found.length > limit };
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
