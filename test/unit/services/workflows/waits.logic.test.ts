import fc from "fast-check";
import { eventDoc } from "../../../../shared/records/events";
import { nextMove } from "../../../../services/workflows/run-moves.logic";
import { storedAfter } from "../../../../services/workflows/run-write.logic";
import { newRun } from "../../../../services/workflows/runs.logic";
import { retry } from "../../../../services/workflows/run-decisions.logic";
import { cancelledByEvent, eventArrived, refused, waitState } from "../../../../services/workflows/wait-moves.logic";
import {
  checkCancelOn,
  checkWaitStep,
  eventMatch,
  filterPasses,
  holds,
  keyOf,
  MATCH_KEYS_MAX,
  MATCH_VALUE_MAX,
  pathsOf,
  resolvedMatch,
  shapeId,
} from "../../../../services/workflows/waits.logic";
import type { Step } from "../../../../services/workflows/workflows.logic";
import { at, claimed, T0, workflow, writeOf } from "./run-fixtures";

const WAIT: Step = {
  id: "pay",
  type: "wait_for_event",
  event_type: "payment.succeeded",
  match: { "data.order_id": "{{ input.order }}", "data.kind": "card" },
  filter: "event.data.amount > 0",
  timeout_ms: 60_000,
};
const event = (data: Record<string, unknown>, ms = T0 + 10) =>
  eventDoc({ org_id: "org_1", environment: "test", type: "payment.succeeded", data, source: "api" }, ms);

describe("keys", () => {
  const scalar = fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.boolean());
  const segment = fc.stringMatching(/^[A-Za-z0-9_-]{1,8}$/);
  it("an event holding a match's values has the match's key under its shape, and only then", () => {
    fc.assert(
      fc.property(fc.dictionary(segment, scalar, { minKeys: 1, maxKeys: 5 }), scalar, (data, other) => {
        const match = Object.fromEntries(Object.entries(data).map(([k, v]) => [`data.${k}`, v]));
        const seen = eventMatch({ data }, pathsOf(match));
        expect(seen).not.toBeNull();
        expect(keyOf("a.b", seen!)).toBe(keyOf("a.b", match));
        expect(holds({ data }, match)).toBe(true);
        const [first] = Object.keys(data);
        if (other !== data[first]) {
          const changed = { data: { ...data, [first]: other } };
          expect(keyOf("a.b", eventMatch(changed, pathsOf(match))!)).not.toBe(keyOf("a.b", match));
          expect(holds(changed, match)).toBe(false);
        }
        expect(keyOf("a.c", match)).not.toBe(keyOf("a.b", match));
      }),
    );
  });

  it("values keep their JSON type: 1 and '1' are different keys; a missing or deep value has none", () => {
    expect(keyOf("a.b", { "data.x": 1 })).not.toBe(keyOf("a.b", { "data.x": "1" }));
    expect(eventMatch({ data: { x: { y: 1 } } }, ["data.x"])).toBeNull();
    expect(eventMatch({ data: {} }, ["data.x"])).toBeNull();
    expect(eventMatch({ data: { x: { y: 1 } } }, ["data.x.y"])).toEqual({ "data.x.y": 1 });
  });

  it("a shape is one per tenant, type and set of paths", () => {
    const t = { org_id: "org_1", environment: "live" };
    expect(shapeId(t, "a.b", ["data.x"])).toBe(shapeId({ ...t }, "a.b", ["data.x"]));
    expect(shapeId(t, "a.b", ["data.x"])).not.toBe(shapeId({ ...t, environment: "test" }, "a.b", ["data.x"]));
    expect(shapeId(t, "a.b", ["data.x"])).not.toBe(shapeId(t, "a.b", ["data.x", "data.y"]));
  });
});

describe("a match's templates", () => {
  const scope = { input: { order: 7, obj: { a: 1 }, long: "x".repeat(MATCH_VALUE_MAX + 1) }, steps: {} };
  it("fill in with their values' types; an object or an over-long value is refused naming the path", () => {
    expect(resolvedMatch({ "data.o": "{{ input.order }}", "data.t": "o-{{ input.order }}" }, scope, "match")).toEqual({
      "data.o": 7,
      "data.t": "o-7",
    });
    expect(() => resolvedMatch({ "data.o": "{{ input.obj }}" }, scope, "match")).toThrow(/'data.o' must equal a string/);
    expect(() => resolvedMatch({ "data.o": "{{ input.long }}" }, scope, "match")).toThrow(/MATCH_VALUE_MAX/);
  });

  it("a filter passes only on true; one that fails on the event does not pass", () => {
    expect(filterPasses("event.data.amount > 0", event({ amount: 1 }))).toBe(true);
    expect(filterPasses("{{ event.data.amount > 0 }}", event({ amount: 0 }))).toBe(false);
    expect(filterPasses("event.data.missing > 0", event({}))).toBe(false);
    expect(filterPasses(undefined, event({}))).toBe(true);
  });
});

describe("the run's side", () => {
  const started = claimed(newRun(workflow([WAIT, { id: "after", type: "set", output: 1 }]), { order: "o1" }, { type: "manual" }, T0));

  it("begins waiting: its registration first, then a parked write due at its timeout showing what it waits for", () => {
    const move = nextMove(started, at(T0 + 5));
    if (move.kind !== "register") throw new Error(move.kind);
    const [{ wait, paths }] = move.registrations;
    expect(paths).toEqual(["data.kind", "data.order_id"]);
    expect(wait).toMatchObject({
      id: `${started.id}/0/1`,
      kind: "wait",
      step: 0,
      attempt: 1,
      match: { "data.order_id": "o1", "data.kind": "card" },
      key: keyOf("payment.succeeded", { "data.order_id": "o1", "data.kind": "card" }),
      filter: WAIT.filter,
      since: new Date(T0 + 5).toISOString(),
      until: new Date(T0 + 5 + 60_000).toISOString(),
    });
    expect(move.write).toMatchObject({ released: true, set: { status: "waiting", due_at: T0 + 5 + 60_000 }, unset: { lease: true } });
    const waiting = storedAfter(started, move.write);
    expect(waiting.steps[0]).toMatchObject({ status: "waiting", waiting_for: { event_type: "payment.succeeded", match: wait.match } });
    expect(waitState(waiting, wait)).toBe("waits");
    // Registered, the parking write not stored yet: an event must come back for it.
    expect(waitState(started, wait)).toBe("arming");
    // Parked: claimed again before its timeout, the engine only lets it go.
    expect(writeOf(nextMove(claimed(waiting), at(T0 + 10))).set).not.toHaveProperty("status");

    const e = event({ order_id: "o1", kind: "card", amount: 3 }, T0 + 20);
    const resumed = storedAfter(waiting, eventArrived(waiting, e, T0 + 30));
    expect(resumed).toMatchObject({ status: "running", cursor: 1, due_at: T0 + 30 });
    expect(resumed.steps[0]).toMatchObject({ status: "succeeded", output: { id: e.id, type: e.type, data: e.data }, timeout_at: null });
    expect(waitState(resumed, wait)).toBe("gone");
    expect(waitState({ ...waiting, attempt: 2 }, wait)).toBe("gone");
    expect(waitState({ ...waiting, status: "cancelled" }, wait)).toBe("gone");

    const timedOut = storedAfter(claimed(waiting), writeOf(nextMove(claimed(waiting), at(T0 + 5 + 60_000))));
    expect(timedOut.steps[0]).toMatchObject({
      status: "failed",
      error_code: "timed_out",
      error: "no payment.succeeded event matched within the step's timeout_ms (60000 ms)",
    });
  });

  it("a run of a workflow with cancel_on registers it at its first claim, then goes on; an event cancels it", () => {
    const wf = {
      ...workflow([{ id: "s", type: "set", output: 1 }]),
      cancel_on: [{ event_type: "order.cancelled", match: { "data.id": "{{ input.id }}" } }],
    };
    const run = claimed(newRun(wf, { id: 4 }, { type: "manual" }, T0));
    const move = nextMove(run, at(T0 + 1));
    if (move.kind !== "register") throw new Error(move.kind);
    expect(move.registrations[0].wait).toMatchObject({
      id: `${run.id}/c0`,
      kind: "cancel",
      match: { "data.id": 4 },
      since: run.created_at,
    });
    const armed = storedAfter(run, move.write);
    expect(armed).toMatchObject({ cancel_armed: true, lease: "L1" });
    expect(nextMove(armed, at(T0 + 2)).kind).toBe("write");
    const e = eventDoc({ org_id: "org_1", environment: "test", type: "order.cancelled", data: { id: 4 }, source: "api" }, T0 + 3);
    const cancelled = storedAfter(armed, cancelledByEvent(armed, e, T0 + 4));
    expect(cancelled).toMatchObject({ status: "cancelled", cancel_reason: "cancel_on", cancel_event_id: e.id, due_at: T0 + 4 });
    expect(cancelled.outbox.at(-1)).toMatchObject({ type: "workflow.completed", data: { status: "cancelled" } });
    // A retry registers it again, as the new attempt's.
    const failed = {
      ...armed,
      status: "failed" as const,
      steps: armed.steps.map((st) => ({ ...st, status: "failed" as const, error: "x" })),
    };
    const retried = storedAfter(failed, retry(failed, T0 + 5));
    expect(retried).toMatchObject({ cancel_armed: false, attempt: 2 });
    expect(nextMove(claimed(retried), at(T0 + 6)).kind).toBe("register");
  });

  it("refused registrations fail the wait step as a step fails, and a run whose cancel_on they are at once", () => {
    const tolerant = claimed(newRun(workflow([{ ...WAIT, on_error: "continue" }]), { order: "o1" }, { type: "manual" }, T0));
    const wait = nextMove(tolerant, at(T0));
    if (wait.kind !== "register") throw new Error(wait.kind);
    const goesOn = storedAfter(tolerant, refused(tolerant, wait, "too many shapes", at(T0)));
    expect(goesOn).toMatchObject({ status: "succeeded", cursor: 1 });
    expect(goesOn.steps[0]).toMatchObject({ status: "failed", error_code: "limit_exceeded", error: "too many shapes" });

    const wf = { ...workflow([{ id: "s", type: "set", output: 1, on_error: "continue" }]), cancel_on: [{ event_type: "a.b", match: {} }] };
    const run = claimed(newRun(wf, {}, { type: "manual" }, T0));
    const arming = nextMove(run, at(T0));
    if (arming.kind !== "register") throw new Error(arming.kind);
    expect(storedAfter(run, refused(run, arming, "too many shapes", at(T0)))).toMatchObject({ status: "failed" });
  });
});

describe("checking a match when it is written", () => {
  class Refused extends Error {
    constructor(readonly field: string) {
      super(field);
    }
  }
  const fault = (field: string) => new Refused(field);
  const value = fc.oneof(fc.string({ maxLength: 300 }), fc.double(), fc.boolean(), fc.constant(null), fc.object({ maxDepth: 1 }));
  const path = fc.oneof(fc.stringMatching(/^data(\.[A-Za-z0-9_-]{1,6}){1,3}$/), fc.string({ maxLength: 10 }));

  it("accepts what the rules allow and refuses the rest naming match or the path at fault", () => {
    fc.assert(
      fc.property(fc.dictionary(path, value, { maxKeys: 7 }), (match) => {
        const entries = Object.entries(match);
        const valid =
          entries.length <= MATCH_KEYS_MAX &&
          entries.every(
            ([p, v]) =>
              /^data(\.[A-Za-z0-9_-]+)+$/.test(p) &&
              ((typeof v === "string" && v.length <= MATCH_VALUE_MAX && !v.includes("{{")) ||
                typeof v === "number" ||
                typeof v === "boolean"),
          );
        try {
          const step = checkWaitStep(fault, "w", { event_type: "a.b", match }, new Set());
          expect(valid).toBe(true);
          expect(step.match).toEqual(match);
        } catch (err) {
          if (!(err instanceof Refused)) throw err;
          expect(valid).toBe(false);
          expect(err.field).toMatch(/^match($|\[|\.)/);
        }
      }),
    );
  });

  it("cancel_on names the entry and field at fault", () => {
    const param = (raw: unknown) => {
      try {
        checkCancelOn(raw);
        return null;
      } catch (err) {
        return (err as { data?: { param?: string } }).data?.param;
      }
    };
    expect(param([{ event_type: "a.b", match: { "data.x": 1 } }])).toBeNull();
    expect(param([{ event_type: "a.b" }, { event_type: "x" }])).toBe("cancel_on[1].event_type");
    expect(param([{ event_type: "a.b", match: { "data.x": [1] } }])).toBe('cancel_on[0].match["data.x"]');
    expect(param("x")).toBe("cancel_on");
  });
});
