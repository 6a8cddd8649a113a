import type { RunDoc } from "../../../../services/workflows/run-doc";
import type { Clock, RunWrite } from "../../../../services/workflows/run-write.logic";
import { newRun } from "../../../../services/workflows/runs.logic";
import type { Move } from "../../../../services/workflows/step-kinds.logic";
import type { Step, WorkflowDoc } from "../../../../services/workflows/workflows.logic";

/** A workflow of each kind of step, its runs and the clock the run state machine's unit tests share. */
export const T0 = Date.parse("2026-01-01T00:00:00.000Z");
export const MARGIN = 5_000;
export const at = (ms: number): Clock => ({ now: ms, leaseMarginMs: MARGIN });
export const iso = (ms: number) => new Date(ms).toISOString();
export const ANN = { key_id: "key_ann", key_name: "ann's key" };

export const STEPS: Step[] = [
  {
    id: "call",
    type: "http",
    method: "POST",
    url: "https://example.com/orders/{{input.order}}",
    headers: { "X-Order": "{{input.order}}" },
    body: { n: "{{input.n}}" },
    timeout_ms: 2_000,
    retries: 1,
  },
  { id: "pause", type: "delay", duration_ms: 1_000 },
  { id: "ok", type: "approval", message: "order {{input.order}}: {{steps.call.output.body.ref}}" },
  { id: "tell", type: "emit", event_type: "order.done", data: { ref: "{{steps.call.output.body.ref}}" } },
];

export function workflow(steps: Step[] = STEPS): WorkflowDoc {
  return {
    id: "wf_1",
    org_id: "org_1",
    environment: "test",
    name: "w",
    description: null,
    status: "active",
    trigger: { type: "manual" },
    steps,
    version: 3,
    created_at: iso(T0),
    updated_at: iso(T0),
  };
}

/** A run as the engine holds it after claiming it. */
export const claimed = (run: RunDoc, lease = "L1"): RunDoc => ({ ...run, lease, stalls: 1, due_at: T0 + MARGIN });

export function writeOf(move: Move): RunWrite {
  if (move.kind !== "write") throw new Error(`expected a write, got ${move.kind}`);
  return move.write;
}

/** The run at its approval step, waiting, its approval.requested published. */
export function waitingForApproval(): RunDoc {
  let run = claimed(newRun(workflow(), { order: "o1", n: 2 }, { type: "manual" }, T0));
  run = { ...run, cursor: 2, status: "waiting" };
  run.steps = run.steps.map((s, i) => (i < 2 ? { ...s, status: "succeeded" } : i === 2 ? { ...s, status: "waiting" } : s));
  delete run.lease;
  delete run.due_at;
  return run;
}
