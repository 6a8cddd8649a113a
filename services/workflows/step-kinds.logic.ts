import { newId } from "../../shared/ids";
import { boundedOutput, outputsBytes } from "./outputs";
import { condition, render, scopeOf } from "./templates";
import type { OutboxEvent, RunDoc } from "./run-doc";
import { iso, keep, put, written, type Clock, type RunWrite } from "./run-write.logic";
import { advance, eventDataFault, fail, finish, skip, wait } from "./runs.logic";
import { requestOf, type HttpRequest } from "./http-step.logic";
import { waitForEvent, type Registering } from "./wait-moves.logic";

/**
 * What the engine does next with a run it holds: publish the outbox (then write `published`),
 * make an http attempt (then write `attempted`), start or look up a child run (child-runs.ts), store registrations then a write (wait-moves.logic.ts), or store a write. `secrets`: the values of the
 * `{{secrets.…}}` the current step uses, which the engine reads once a move is a call.
 */
export type Move =
  { kind: "publish" } | { kind: "call"; request: HttpRequest } | { kind: "child" } | { kind: "write"; write: RunWrite } | Registering;

/** The current step, taken one move further. */
export function start(run: RunDoc, c: Clock, secrets: Record<string, string>): Move {
  const step = run.definition[run.cursor];
  const write = (w: RunWrite): Move => ({ kind: "write", write: w });
  const at = iso(c.now);
  if (!step) return write(written(run, finish(run, "succeeded", at), keep(c), c.now, true));
  const state = run.steps[run.cursor];
  if (step.if !== undefined && state.status === "pending" && !condition(step.if, scopeOf(run))) return write(skip(run, c));
  switch (step.type) {
    case "delay":
      if (state.status !== "waiting") return write(wait(run, c, c.now + step.duration_ms));
      return write(advance(run, { output: { waited_ms: step.duration_ms } }, c));
    case "approval": {
      const message = step.message === null ? null : render(step.message, scopeOf(run));
      const data = { workflow_id: run.workflow_id, run_id: run.id, step_id: step.id, message };
      const fault = eventDataFault(data);
      if (fault) return write(fail(run, `approval.requested: ${fault}`, c));
      // On the run as text (a template of the whole message may have filled in a value).
      const text = message === null || typeof message === "string" ? message : JSON.stringify(message);
      return write(
        wait(run, c, null, { id: newId("evt"), type: "approval.requested", data }, { message: text, timeoutMs: step.timeout_ms }),
      );
    }
    case "emit": {
      const data = render(step.data, scopeOf(run)) as Record<string, unknown>;
      // A template may have put a deep value into the data: it must be what POST /events takes.
      const fault = eventDataFault(data);
      if (fault) return write(fail(run, fault, c, { attempt_count: 1 }));
      const event: OutboxEvent = { id: newId("evt"), type: step.event_type, data };
      return write(advance(run, { output: { event_id: event.id }, started_at: at, attempt_count: 1 }, c, event));
    }
    case "set": {
      const output = boundedOutput(render(step.output, scopeOf(run)), outputsBytes(run.steps, run.cursor));
      return write(advance(run, { output, started_at: at, attempt_count: 1 }, c));
    }
    case "stop": {
      const rendered = step.message === null ? null : render(step.message, scopeOf(run));
      const message = rendered === null || typeof rendered === "string" ? rendered : JSON.stringify(rendered);
      const stopped = { ...run, stop_message: message, steps: put(run, { output: { status: step.status, message }, attempt_count: 1 }) };
      const end =
        step.status === "succeeded"
          ? finish(stopped, "succeeded", at, "succeeded")
          : finish(stopped, "failed", at, "failed", message ?? "stopped", "stopped");
      return write(written(run, { stop_message: message, ...end }, keep(c), c.now, true));
    }
    case "wait_for_event":
      return waitForEvent(run, step, c);
    case "run_workflow":
    case "map":
    case "parallel":
      return { kind: "child" };
    case "http":
      if (run.status === "running" && state.status === "running") {
        // A claim covers its margin only: a run claimed with its attempt still to make first stores
        // a claim covering the request's time-out, else another claim would send it again meanwhile.
        if ((run.due_at ?? 0) >= c.now + step.timeout_ms) return { kind: "call", request: requestOf(step, run, secrets) };
        return write(written(run, {}, keep(c), c.now, false));
      }
      // Shown as running before the request leaves (a crash then repeats the attempt). Not
      // progress: a request whose answer is never stored counts towards MAX_STALLS.
      return write(
        written(
          run,
          { status: "running", steps: put(run, { status: "running", started_at: state.started_at ?? at }) },
          keep(c),
          c.now,
          false,
        ),
      );
  }
}
