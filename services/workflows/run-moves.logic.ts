import type { Update } from "../../shared/storage/types";
import { TemplateError } from "./outputs";
import type { OutboxEvent, RunDoc } from "./run-doc";
import { isParked, iso, keep, PARKED, storedAfter, TERMINAL, written, type Clock, type RunWrite } from "./run-write.logic";
import { fail, finish } from "./runs.logic";
import { start, type Move } from "./step-kinds.logic";
import type { ApprovalStep, WaitForEventStep } from "./workflows.logic";
import { cancelArming } from "./wait-moves.logic";

/**
 * What the engine (engine.ts) does with a run it holds: claim it, take its next move, publish its
 * outbox, end it at a passed time limit, hand it back, or give it up after MAX_STALLS claims.
 */

/**
 * Claims of a run in a row that ended before any progress of it was stored (the store failed, or
 * the node stopped mid-step) before the engine gives the run up instead of trying it again.
 */
export const MAX_STALLS = 3;

/** A claim of a due run by `lease`: it lasts the margin, and counts as a stall until a write of progress resets it. */
export const claim = (lease: string, c: Clock): Update => ({ $set: { due_at: c.now + c.leaseMarginMs, lease }, $inc: { stalls: 1 } });

/**
 * A new run as it is stored already claimed by `lease` (the node starting it drives it at once):
 * the state `claim` would leave it in, so a node killed before it stores anything more leaves a
 * run that falls due when the claim runs out, as after any claim. When the engine's first write
 * would only show its http step running (nothing to publish, the claim kept), that write is stored
 * with it: the run starts `running`, as the engine would have stored it before the request leaves.
 */
export function claimedAtStart(run: RunDoc, lease: string, c: Clock): RunDoc {
  const claimed = { ...run, due_at: c.now + c.leaseMarginMs, lease, stalls: (run.stalls ?? 0) + 1 };
  const move = nextMove(claimed, c);
  if (move.kind !== "write" || move.write.released || move.write.events.length > 0) return claimed;
  return storedAfter(claimed, move.write);
}

export function nextMove(run: RunDoc, c: Clock, secrets: Record<string, string> = {}): Move {
  if (run.outbox.length > 0) return { kind: "publish" };
  const late = timedOut(run, c);
  if (late) return { kind: "write", write: late };
  const arming = cancelArming(run, c);
  if (arming) return arming;
  if (isParked(run)) return { kind: "write", write: written(run, {}, PARKED, c.now, true) };
  try {
    return start(run, c, secrets);
  } catch (err) {
    // A template that cannot be filled (a missing value, a truncated output): the step fails.
    if (!(err instanceof TemplateError)) throw err;
    return { kind: "write", write: fail(run, err.message, c, {}, "template_error") };
  }
}

/**
 * A time limit that has passed: the run's (it fails at its current step with `run_timed_out`), or
 * its waiting approval's (the step fails with `timed_out`, and its on_error decides); else null.
 */
function timedOut(run: RunDoc, c: Clock): RunWrite | null {
  if (TERMINAL.has(run.status)) return null;
  if (run.deadline_at !== undefined && run.deadline_at <= c.now) {
    const at = iso(c.now);
    const why = `the run did not end within its workflow's timeout_ms (${run.timeout_ms ?? "?"} ms)`;
    return written(run, finish(run, "failed", at, "failed", why, "run_timed_out"), keep(c), c.now, true);
  }
  const state = run.steps[run.cursor];
  // A run_workflow step's time-out also cancels its child: child-runs.ts takes it.
  const own = run.definition[run.cursor]?.type !== "run_workflow";
  if (own && state?.status === "waiting" && state.timeout_at && Date.parse(state.timeout_at) <= c.now) {
    const step = run.definition[run.cursor] as ApprovalStep | WaitForEventStep;
    const what = step.type === "wait_for_event" ? `no ${step.event_type} event matched` : "no decision";
    const write = fail(run, `${what} within the step's timeout_ms (${step.timeout_ms ?? "?"} ms)`, c, {}, "timed_out");
    return { ...write, set: { ...write.set, pending_approval: null } };
  }
  return null;
}

/** The outbox was published: emptied; a run that waits for a person or has ended is let go without a due time. */
export function published(run: RunDoc, c: Clock): RunWrite {
  return written(run, { outbox: [] }, isParked(run) ? PARKED : keep(c), c.now, true);
}

/** The engine stops: the run is handed back, due now, for any node to go on. */
export function handBack(run: RunDoc, c: Clock): RunWrite {
  return written(run, {}, { kind: "due", at: c.now }, c.now, true);
}

/**
 * The run was claimed more than MAX_STALLS times in a row and no drive of it stored any progress:
 * it is not tried again. Events it could not publish (what stalled it, most likely) are dropped.
 * The run fails, saying why (`why`), at the step whose event was dropped (an emit step: the run did
 * not do what it would report), or else at its current step; a run that had ended otherwise, or
 * waits for approval, keeps its state. Its workflow.completed is published as usual.
 */
export function giveUp(run: RunDoc, c: Clock): { write: RunWrite; dropped: OutboxEvent[]; why: string | null } {
  const tries = `in ${MAX_STALLS} tries in a row`;
  const dropped = run.outbox;
  const lost = dropped.find((e) => e.type !== "workflow.completed" && e.type !== "approval.requested");
  const culprit = lost ? run.steps.findIndex((s) => (s.output as { event_id?: unknown } | null)?.event_id === lost.id) : -1;
  if (isParked(run) && !(culprit >= 0 && run.status === "succeeded"))
    return { write: written(run, { outbox: [] }, PARKED, c.now, true), dropped, why: null };
  const why = lost
    ? `the event ${lost.type} (${lost.id}) could not be stored ${tries}; given up`
    : `the run stopped: its progress could not be stored ${tries} (the store failed, or the node driving it stopped); given up`;
  const at = { ...run, cursor: culprit >= 0 ? culprit : Math.min(run.cursor, run.steps.length - 1), outbox: [] };
  return { write: written(run, finish(at, "failed", iso(c.now), "failed", why), keep(c), c.now, true), dropped, why };
}
