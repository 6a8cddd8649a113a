import { idParam, pageParams, type PageParams } from "../../shared/api/pagination";

const id = idParam;
const name = { type: "string", trim: true, min: 1, max: 200 } as const;
/** null or absent: no description (as the workflow answers it). */
const description = { type: "string", trim: true, max: 1000, optional: true, nullable: true } as const;
const status = { type: "enum", values: ["active", "inactive"], optional: true } as const;
// The trigger and the steps are checked in the logic, to name the step and field at fault.
const trigger = { type: "any" } as const;
const steps = { type: "any" } as const;
/** The most a run may take (docs/workflows/language.md): 30 days. */
export const RUN_TIMEOUT_MAX_MS = 30 * 24 * 60 * 60 * 1000;
/** null or absent: runs have no time limit. */
const timeout_ms = { type: "number", integer: true, min: 1, max: RUN_TIMEOUT_MAX_MS, optional: true, nullable: true } as const;

/** Checked in the logic (waits.logic.ts), to name the entry and field at fault; null or absent: none. */
const cancel_on = { type: "any", optional: true } as const;
/** Templates over the steps (workflows.logic.ts `checkOutput`); null or absent: none. */
const output = { type: "any", optional: true, nullable: true } as const;

/** Flow control (flow-control.logic.ts), checked in the logic to name the field; null or absent: none. */
const concurrency = { type: "any", optional: true, nullable: true } as const;
const throttle = { type: "any", optional: true, nullable: true } as const;
const debounce = { type: "any", optional: true, nullable: true } as const;

export const createParams = {
  $$strict: true,
  name,
  description,
  status,
  trigger,
  steps,
  timeout_ms,
  cancel_on,
  output,
  concurrency,
  throttle,
  debounce,
} as const;
export interface CreateParams {
  concurrency?: unknown;
  throttle?: unknown;
  debounce?: unknown;
  output?: unknown;
  name: string;
  description?: string | null;
  status?: "active" | "inactive";
  trigger: unknown;
  steps: unknown;
  timeout_ms?: number | null;
  cancel_on?: unknown;
}

export const listParams = {
  $$strict: true,
  ...pageParams,
  status,
  trigger_event_type: { type: "string", min: 1, max: 100, optional: true },
} as const;
export interface ListParams extends PageParams {
  status?: "active" | "inactive";
  trigger_event_type?: string;
}

export const updateParams = {
  $$strict: true,
  id,
  name: { ...name, optional: true },
  description,
  status,
  trigger: { type: "any", optional: true },
  steps: { type: "any", optional: true },
  timeout_ms,
  // null removes it.
  cancel_on: { ...cancel_on, nullable: true },
  output,
  concurrency,
  throttle,
  debounce,
} as const;
export interface UpdateParams {
  concurrency?: unknown;
  throttle?: unknown;
  debounce?: unknown;
  output?: unknown;
  id: string;
  name?: string;
  description?: string | null;
  status?: "active" | "inactive";
  trigger?: unknown;
  steps?: unknown;
  timeout_ms?: number | null;
  cancel_on?: unknown;
}

export { idParams, type IdParams } from "../../shared/api/pagination";

export const startRunParams = { $$strict: true, id, input: { type: "object", optional: true } } as const;
export interface StartRunParams {
  id: string;
  input?: Record<string, unknown>;
}

const RUN_STATUS_VALUES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"];
export const listRunsParams = {
  $$strict: true,
  id,
  ...pageParams,
  status: { type: "enum", values: RUN_STATUS_VALUES, optional: true },
} as const;
export interface ListRunsParams extends PageParams {
  id: string;
  status?: string;
}

export const runParams = { $$strict: true, id, run_id: id } as const;
export interface RunParams {
  id: string;
  run_id: string;
}

/** POST …/rerun: the step to start from (the steps before it copied from the run) and a new input. */
export const rerunParams = {
  ...runParams,
  from_step: { type: "string", min: 1, max: 64, optional: true },
  input: { type: "object", optional: true },
} as const;
export interface RerunParams extends RunParams {
  from_step?: string;
  input?: Record<string, unknown>;
}

/** The most characters of an approval's comment. */
export const COMMENT_MAX = 1000;
export const decideParams = {
  ...runParams,
  comment: { type: "string", trim: true, max: COMMENT_MAX, optional: true, nullable: true },
} as const;
export interface DecideParams extends RunParams {
  comment?: string | null;
}

const instant = { type: "string", min: 1, max: 64, optional: true } as const;
/** A step's id, as a definition writes it (shared/api/schemas/steps.ts). */
export const STEP_ID = /^[a-z][a-z0-9_]{0,49}$/;
/**
 * GET /runs: every workflow's runs, newest first, by status, workflow and creation time (`created_after` ≤ created_at < `created_before`);
 * with `step_id` (and `parent_run_id`), that step's children in item order (step-children.ts).
 */
export const listAllRunsParams = {
  $$strict: true,
  ...pageParams,
  status: { type: "enum", values: RUN_STATUS_VALUES, optional: true },
  workflow_id: { ...id, optional: true },
  parent_run_id: { ...id, optional: true },
  step_id: { type: "string", pattern: STEP_ID, optional: true },
  created_after: instant,
  created_before: instant,
} as const;
export interface ListAllRunsParams extends PageParams {
  status?: string;
  workflow_id?: string;
  parent_run_id?: string;
  step_id?: string;
  created_after?: string;
  created_before?: string;
}

export const versionParams = { $$strict: true, id, version: { type: "number", integer: true, min: 1, convert: true } } as const;
export interface VersionParams {
  id: string;
  version: number;
}
