import { attemptCountOf } from "./templates";
import type { RunDoc } from "./run-doc";
import type { Run, RunStep, StepAttempt } from "../../shared/api/wire";

/** A run as the API shows it: its stored document without the fields that run it. */
export type RunView = Run;

export const runView = ({
  org_id: _o,
  definition: _d,
  cursor: _c,
  rev: _r,
  due_at: _due,
  lease: _l,
  stalls: _st,
  outbox: _ob,
  trigger_key: _t,
  chain_depth: _cd,
  chain_root: _cr,
  request_id: _rq,
  traceparent: _tp,
  deadline_at,
  timeout_ms,
  cancel_on: _co,
  cancel_armed: _ca,
  output_template: _ot,
  root_run_id: _rr,
  depth: _dp,
  wakes_parent_at: _wp,
  parent_attempt: _pa,
  bulk_job: _bj,
  flow,
  held_at: _ha,
  release_at: _ra,
  debounce_key: _dk,
  debounce_deadline: _dd,
  flow_key,
  queued_reason,
  ...view
}: RunDoc): RunView => ({
  object: "run",
  ...view,
  // Runs stored before these fields existed: their first attempt, no rerun, no pending approval shown.
  attempt: view.attempt ?? 1,
  rerun_of: view.rerun_of ?? null,
  pending_approval: view.pending_approval ?? null,
  stop_message: view.stop_message ?? null,
  timeout_ms: timeout_ms ?? null,
  deadline_at: deadline_at === undefined ? null : new Date(deadline_at).toISOString(),
  parent: view.parent ?? null,
  queued_reason: queued_reason ?? null,
  // Stored after its workflow's id (the key is the workflow's own).
  // A run held only for the start budget has no key of its own.
  flow_key:
    !flow_key || (flow?.concurrency === undefined && flow?.throttle === undefined) ? null : flow_key.slice(flow_key.indexOf("/") + 1),
  output: view.output ?? null,
  // Runs stored before the rename counted a step's tries in `attempts`; it now lists them.
  steps: view.steps.map(({ attempts, ...step }: Omit<RunStep, "attempts"> & { attempts?: number | StepAttempt[] }) => ({
    ...step,
    attempt_count: attemptCountOf({ ...step, attempts }),
    ...(Array.isArray(attempts) && { attempts }),
  })),
});
