import type { EventDoc } from "../../shared/records/events";
import type { WaitForEventStep } from "../../shared/api/wire";
import { boundedOutput, outputsBytes } from "./outputs";
import type { RunDoc } from "./run-doc";
import { iso, keep, put, PARKED, TERMINAL, written, type Clock, type RunWrite } from "./run-write.logic";
import { fail, finish } from "./runs.logic";
import { scopeOf } from "./templates";
import { eventView } from "./trigger-match";
import type { Registration, WaitDoc } from "./wait-records";
import { keyOf, pathsOf, resolvedMatch, WAIT_MAX_MS, type MatchValue } from "./waits.logic";

/**
 * The run's side of waits (waits.logic.ts): the registrations the engine stores before the write
 * that makes a run wait for an event or arms its cancel_on, and the transitions a matching event
 * makes (the step succeeds with the event; the run is cancelled).
 */

/** What the engine stores (`registrations`, first) and then writes under its lease. */
export interface Registering {
  kind: "register";
  registrations: Registration[];
  write: RunWrite;
}

function registration(
  run: RunDoc,
  id: string,
  kind: WaitDoc["kind"],
  eventType: string,
  match: Record<string, MatchValue>,
  since: string,
  until: string,
  extra: Partial<WaitDoc> = {},
): Registration {
  return {
    paths: pathsOf(match),
    wait: {
      id,
      org_id: run.org_id,
      environment: run.environment,
      key: keyOf(eventType, match),
      kind,
      run_id: run.id,
      workflow_id: run.workflow_id,
      attempt: run.attempt ?? 1,
      event_type: eventType,
      match,
      since,
      until,
      ...extra,
    },
  };
}

/**
 * The current wait_for_event step begins waiting: registered, then the run shows `waiting` with
 * what it waits for and until when, parked but for its timeout (a waiting run is parked:
 * run-write.logic.ts `isParked`).
 */
export function waitForEvent(run: RunDoc, step: WaitForEventStep, c: Clock): Registering {
  const extra = { step: run.cursor, ...(step.filter !== undefined && { filter: step.filter }) };
  const id = `${run.id}/${run.cursor}/${run.attempt ?? 1}`;
  const match = resolvedMatch(step.match, scopeOf(run), "match");
  const at = iso(c.now);
  const until = iso(c.now + step.timeout_ms);
  const waiting = { status: "waiting" as const, started_at: at, timeout_at: until, waiting_for: { event_type: step.event_type, match } };
  return {
    kind: "register",
    registrations: [registration(run, id, "wait", step.event_type, match, at, until, extra)],
    write: written(run, { status: "waiting", steps: put(run, waiting) }, PARKED, c.now, true),
  };
}

/** A run whose workflow has cancel_on, not yet registered: its registrations (templates over its input), then the mark. */
export function cancelArming(run: RunDoc, c: Clock): Registering | null {
  if (!run.cancel_on || run.cancel_on.length === 0 || run.cancel_armed || TERMINAL.has(run.status)) return null;
  const scope = scopeOf({ ...run, cursor: 0 });
  const until = iso(run.deadline_at ?? Date.parse(run.created_at) + WAIT_MAX_MS);
  return {
    kind: "register",
    registrations: run.cancel_on.map((entry, i) =>
      registration(
        run,
        `${run.id}/c${i}`,
        "cancel",
        entry.event_type,
        resolvedMatch(entry.match, scope, `cancel_on[${i}].match`),
        run.created_at,
        until,
      ),
    ),
    write: written(run, { cancel_armed: true }, keep(c), c.now, true),
  };
}

/**
 * Where `run` stands for its registration `wait`: it `waits` at that step, in that attempt; it is
 * `arming` (the registration is stored, the write that parks the run not yet: an event must come
 * back once it is); or it is `gone` past it.
 */
export function waitState(run: RunDoc, wait: WaitDoc): "waits" | "arming" | "gone" {
  const here =
    !TERMINAL.has(run.status) &&
    run.cursor === wait.step &&
    (run.attempt ?? 1) === wait.attempt &&
    run.definition[run.cursor]?.type === "wait_for_event";
  if (!here) return "gone";
  return run.status === "waiting" && run.steps[run.cursor]?.status === "waiting" ? "waits" : "arming";
}

/**
 * Registrations refused (`why`: a limit, named): the wait step fails as any step does; a run whose
 * cancel_on cannot be registered fails at once, whatever the step's on_error, as it could not be
 * cancelled as its workflow says.
 */
export function refused(run: RunDoc, move: Registering, why: string, c: Clock): RunWrite {
  if (move.write.set.cancel_armed === undefined) return fail(run, why, c, {}, "limit_exceeded");
  return written(run, finish(run, "failed", iso(c.now), "failed", why, "limit_exceeded"), keep(c), c.now, true);
}

/** The event came: the wait_for_event step succeeds with it as its output, and the run is due now to go on. */
export function eventArrived(run: RunDoc, event: EventDoc, now: number): RunWrite {
  const output = boundedOutput(eventView(event), outputsBytes(run.steps, run.cursor));
  const steps = put(run, { status: "succeeded", output, finished_at: iso(now), timeout_at: null });
  return written(run, { status: "running", cursor: run.cursor + 1, steps }, { kind: "due", at: now }, now, false);
}

/** An event of the workflow's cancel_on came: the run ends `cancelled` at its current step, saying which event. */
export function cancelledByEvent(run: RunDoc, event: EventDoc, now: number): RunWrite {
  const marked = { ...run, cancel_reason: "cancel_on" as const, cancel_event_id: event.id };
  const change = { cancel_reason: "cancel_on" as const, cancel_event_id: event.id, ...finish(marked, "cancelled", iso(now), "cancelled") };
  return written(run, change, { kind: "due", at: now }, now, false);
}
