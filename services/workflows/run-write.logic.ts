import type { Update } from "../../shared/storage/types";
import { FINISHED_RUN_STATUSES, type RunStatus, type RunStep } from "../../shared/api/wire";
import type { OutboxEvent, RunDoc } from "./run-doc";
import type { Step } from "./workflows.logic";

/**
 * One write of a run (runs.logic.ts): what a transition answers, and how the engine holds the run
 * after it (keeps its claim, lets it go due at a time, or parks it). Every transition of the run
 * state machine is built from `written`.
 */

/** The statuses of a run that has ended. */
export const TERMINAL: ReadonlySet<RunStatus> = new Set(FINISHED_RUN_STATUSES);

/** What a transition of the engine's needs besides the run: the time, and how long a claim outlives the step it covers. */
export interface Clock {
  now: number;
  leaseMarginMs: number;
}

/** One write of a run: the fields it sets (revision, update time, due time) and removes, and the events it queues in the outbox. */
export interface RunWrite {
  set: Partial<RunDoc>;
  unset: Partial<Record<"lease" | "due_at" | "stalls", true>>;
  events: OutboxEvent[];
  /** The engine's claim goes with the write: the run is no longer the engine's to drive. */
  released: boolean;
}

/**
 * After a write: the engine keeps its claim and goes on (the claim then covers the next step), or
 * lets the run go, due again at `at`, or parked (no due time: it waits for a person, or has ended).
 */
export type Hold = { kind: "keep"; marginMs: number } | { kind: "due"; at: number } | { kind: "parked" };

export const PARKED: Hold = { kind: "parked" };
export const keep = (c: Clock): Hold => ({ kind: "keep", marginMs: c.leaseMarginMs });
export const iso = (ms: number): string => new Date(ms).toISOString();
const leaseFor = (step: Step | undefined, marginMs: number): number => (step?.type === "http" ? step.timeout_ms : 0) + marginMs;

/**
 * The write of `change`. Every write bumps `rev`; `progress` (every write but a decision's and the
 * mark of an http attempt before its request) resets the count of claims that stored nothing.
 */
export function written(run: RunDoc, change: Partial<RunDoc>, given: Hold, now: number, progress: boolean): RunWrite {
  // A time limit (the run's, a waiting approval's) makes a parked or waiting run due when it falls due.
  const limit = limitOf(
    change.status ?? run.status,
    change.steps ?? run.steps,
    change.cursor ?? run.cursor,
    "deadline_at" in change ? change.deadline_at : run.deadline_at,
  );
  const hold: Hold =
    limit === null || given.kind === "keep" ? given : { kind: "due", at: given.kind === "due" ? Math.min(given.at, limit) : limit };
  const dueAt =
    hold.kind === "keep"
      ? now + leaseFor(run.definition[change.cursor ?? run.cursor], hold.marginMs)
      : hold.kind === "due"
        ? hold.at
        : null;
  const added = change.outbox;
  return {
    set: { ...change, rev: run.rev + 1, updated_at: iso(now), ...(dueAt !== null && { due_at: dueAt }) },
    unset: {
      ...(progress && { stalls: true as const }),
      ...(hold.kind !== "keep" && { lease: true as const }),
      ...(hold.kind === "parked" && { due_at: true as const }),
    },
    events: added === undefined || added.length === 0 ? [] : newEvents(run.outbox, added),
    released: hold.kind !== "keep",
  };
}

/** The events of `added` not in `queued` already (by id). */
function newEvents(queued: OutboxEvent[], added: OutboxEvent[]): OutboxEvent[] {
  if (queued.length === 0) return added;
  const ids = new Set(queued.map((e) => e.id));
  return added.filter((e) => !ids.has(e.id));
}

/** The earliest time limit of a run that has not ended: its deadline, its waiting step's timeout; null when none. */
function limitOf(status: RunStatus, steps: RunStep[], cursor: number, deadline: number | undefined): number | null {
  if (TERMINAL.has(status)) return null;
  const waiting = steps[cursor];
  const approval = waiting?.status === "waiting" && waiting.timeout_at ? Date.parse(waiting.timeout_at) : null;
  if (approval === null) return deadline ?? null;
  return deadline === undefined ? approval : Math.min(deadline, approval);
}

/** The store's update for a write. */
export const updateOf = (write: RunWrite): Update => ({
  $set: { ...write.set },
  ...(Object.keys(write.unset).length > 0 && { $unset: { ...write.unset } }),
});

/** The run as the store leaves it after `write`. */
export function storedAfter(run: RunDoc, write: RunWrite): RunDoc {
  const next: Record<string, unknown> = { ...run, ...write.set };
  for (const field of Object.keys(write.unset)) delete next[field];
  return next as unknown as RunDoc;
}

/** The run's steps with the current one changed by `patch`. */
export function put(run: RunDoc, patch: Partial<RunStep>): RunStep[] {
  const steps = [...run.steps];
  steps[run.cursor] = { ...steps[run.cursor], ...patch };
  return steps;
}

/** Ended, or waiting for a person or an event: nothing left for the engine but the outbox (and a time limit). */
export function isParked(run: RunDoc): boolean {
  const type = run.definition[run.cursor]?.type;
  return TERMINAL.has(run.status) || ((type === "approval" || type === "wait_for_event") && run.steps[run.cursor]?.status === "waiting");
}
