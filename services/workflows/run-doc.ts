import type { CancelOn, Run, Step } from "../../shared/api/wire";

export interface OutboxEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/** What a run of a workflow with flow control carries of it, as it was when the run started (flow-control.logic.ts). */
export interface RunFlow {
  concurrency?: number;
  /** The throttle, and its key when it is not the run's `flow_key`. */
  throttle?: { limit: number; period_ms: number; key?: string };
  /** A debounced run: its burst's period (a start within it of the last joins the pending run). */
  debounce_ms?: number;
  /** A run accepted over RUN_STARTS_PER_MINUTE: counted against the minute it goes in, at most this many per minute. */
  starts?: number;
}

/** A run as stored: what the API shows (shared/api/wire.ts) and the fields that run it. */
export interface RunDoc extends Omit<Run, "object" | "deadline_at"> {
  org_id: string;
  /** Internal: the steps as they were when the run started (the workflow may change meanwhile). */
  definition: Step[];
  /** Internal: index of the current step. */
  cursor: number;
  /** Internal: bumped by every write; the API's compare-and-set. */
  rev: number;
  /** Internal: ms since the epoch when the engine has work on this run; absent while it waits for a person or has ended. */
  due_at?: number;
  /** Internal: the engine node's claim. */
  lease?: string;
  /** Internal: claims in a row that stored no progress of the run (run-moves.logic.ts MAX_STALLS). */
  stalls?: number;
  outbox: OutboxEvent[];
  /** Internal: ms since the epoch by which the run must end (its workflow's timeout_ms), and that timeout. */
  deadline_at?: number;
  timeout_ms?: number;
  /** Internal, event-started runs: `<workflow_id>/<event_id>`, unique, so an event starts a workflow once. */
  trigger_key?: string;
  /** Internal: event-started runs in the chain that led to this one (its events carry it on). */
  chain_depth?: number;
  /** Internal, event-started runs: the root event of their chain, whose run budget they count against. */
  chain_root?: string;
  /** Internal: its workflow's cancel_on when it started, and whether it is registered (wait-moves.logic.ts). */
  cancel_on?: CancelOn[];
  cancel_armed?: boolean;
  /** Internal: its workflow's `output` templates, filled when the run succeeds (run-output.logic.ts). */
  output_template?: unknown;
  /** Internal, child runs (child-runs.logic.ts): the root run of the tree, and how deep under it this run is (the root: 0). */
  root_run_id?: string;
  depth?: number;
  /** Internal, child runs whose parent step waits for them: the parent's cursor at that step, which their end makes due. */
  wakes_parent_at?: number;
  /** Internal, children of a map or parallel step: the parent's attempt that started it (fan-out.ts). */
  parent_attempt?: number;
  /** Internal: the bulk job (bulk.mixin.ts) that last retried or cancelled it, so a batch done again acts on it once. */
  bulk_job?: string;
  /** Internal, runs of a workflow with flow control (flow-control.logic.ts): its limits when it started. */
  flow?: RunFlow;
  /** Internal: while held behind its flow control, when it came (the order runs of a key go in). */
  held_at?: number;
  /** Internal: while held, when a node's sweep next looks at its key (flow-gate.ts). */
  release_at?: number;
  /** Internal, a debounced run still taking its burst's starts: `<workflow>/<key>` (unique), and when it goes at the latest. */
  debounce_key?: string;
  debounce_deadline?: number;
  /** Internal: the request that started it (directly or through its event) and its traceparent (shared/runtime/trace.ts). */
  request_id?: string;
  traceparent?: string;
}
