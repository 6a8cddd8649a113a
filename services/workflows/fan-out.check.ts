import { ApiError, echo, type ErrorCode } from "../../shared/errors";
import { formatPath } from "../../shared/api/json-limits";
import { isId } from "../../shared/ids";
import type { MapStep, ParallelStep, Step } from "../../shared/api/wire";
import { MAP_ITEMS_MAX, MAX_NESTING } from "./child-limits";

/**
 * `map` and `parallel` steps (docs/workflows/README.md#map), checked when written: their inline
 * steps are checked as a workflow's are, and an error inside them names the whole path
 * (`steps[2].steps[0].url`, `steps[1].branches.crm[0].url`).
 */

export const MAX_CONCURRENCY = 100;
export const MAX_BRANCHES = 10;
const BRANCH_NAME = /^[a-z][a-z0-9_]{0,49}$/;

interface Fault {
  param(field?: string): string;
  error(field: string | undefined, message: string, code?: ErrorCode): ApiError;
}

interface Nested {
  /** This list's level: 0 for a workflow's steps, one more for each map or parallel around it. */
  depth: number;
  /** Checks a list of steps at `depth` (workflows.logic.ts `checkSteps`). */
  steps: (raw: unknown, depth: number) => Promise<Step[]>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The inner list `raw`, checked one level deeper; its errors named from `at` (the field holding it). */
async function inner(fault: Fault, at: string, raw: unknown, nested: Nested): Promise<Step[]> {
  try {
    return await nested.steps(raw, nested.depth + 1);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    const data = (err.data ?? {}) as { param?: string };
    // The inner check names `steps…`: the same path under this step's field.
    const param = fault.param(at) + (data.param ?? "steps").slice("steps".length);
    throw new ApiError(err.type as ErrorCode, fault.error(at, err.message).message, { ...data, param });
  }
}

function whole(fault: Fault, field: string, value: unknown, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max)
    throw fault.error(field, `${field} must be a whole number from ${min} to ${max}; received ${echo(value)}`);
  return value;
}

export async function checkFanOut(
  fault: Fault,
  id: string,
  type: "map" | "parallel",
  item: Record<string, unknown>,
  nested: Nested,
): Promise<MapStep | ParallelStep> {
  if (nested.depth + 1 > MAX_NESTING)
    throw fault.error(undefined, `map and parallel steps nest at most ${MAX_NESTING} levels deep (MAX_NESTING)`);
  if (type === "parallel") {
    const raw = item.branches;
    if (!isObject(raw) || Object.keys(raw).length < 1 || Object.keys(raw).length > MAX_BRANCHES)
      throw fault.error("branches", `branches must be an object of 1 to ${MAX_BRANCHES} named lists of steps`);
    const branches: Record<string, Step[]> = {};
    for (const [name, steps] of Object.entries(raw)) {
      const at = formatPath([name], "branches");
      if (!BRANCH_NAME.test(name))
        throw fault.error(at, "a branch's name must start with a lower-case letter and hold only a-z, 0-9 and _ (at most 50)");
      branches[name] = await inner(fault, at, steps, nested);
    }
    return { id, type, branches };
  }
  const items = item.items;
  if (!(typeof items === "string" && items.includes("{{")) && !(Array.isArray(items) && items.length <= MAP_ITEMS_MAX))
    throw fault.error(
      "items",
      `items must be a template that gives a list (such as "{{ input.orders }}"), or a list of at most ${MAP_ITEMS_MAX}`,
    );
  const max = whole(fault, "max_concurrency", item.max_concurrency, 1, MAX_CONCURRENCY, 10);
  const tolerated = whole(fault, "tolerated_failures", item.tolerated_failures, 0, MAP_ITEMS_MAX, 0);
  const step = { id, type, items: items as string, max_concurrency: max, tolerated_failures: tolerated };
  if ((item.steps === undefined) === (item.workflow_id === undefined))
    throw fault.error("steps", "a map step takes either steps (run for each item) or workflow_id (a workflow run for each item)");
  if (item.steps !== undefined) return { ...step, steps: await inner(fault, "steps", item.steps, nested) };
  const target = item.workflow_id;
  if (typeof target !== "string" || target.length > 2000 || (!target.includes("{{") && !isId("wf", target)))
    throw fault.error("workflow_id", "workflow_id must be a workflow's id (wf_…), or a template that gives one");
  return { ...step, workflow_id: target };
}

/** A workflow named by its id in a step, at any level of map and parallel steps, with the path that names the field. */
export interface NamedWorkflow {
  param: string;
  stepId: string;
  target: string;
}

/** The literal workflow ids of `steps` and of the steps inside their map and parallel steps (templates are checked when run). */
export function namedWorkflows(steps: readonly Step[], at = "steps"): NamedWorkflow[] {
  return steps.flatMap((step, i): NamedWorkflow[] => {
    const here = `${at}[${i}]`;
    const target = step.type === "run_workflow" || step.type === "map" ? step.workflow_id : undefined;
    const own = target !== undefined && !target.includes("{{") ? [{ param: `${here}.workflow_id`, stepId: step.id, target }] : [];
    if (step.type === "map" && step.steps) return [...own, ...namedWorkflows(step.steps, `${here}.steps`)];
    if (step.type === "parallel")
      return Object.entries(step.branches).flatMap(([name, list]) => namedWorkflows(list, formatPath([name], `${here}.branches`)));
    return own;
  });
}
