import fc from "fast-check";
import { ApiError } from "../../../../shared/errors";
import { checkFlow, FLOW_KEY_MAX_CHARS, held, keyOf, windowOf } from "../../../../services/workflows/flow-control.logic";
import type { RunDoc } from "../../../../services/workflows/run-doc";

const paramOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (err) {
    if (err instanceof ApiError) return (err.data as { param?: string } | undefined)?.param;
    throw err;
  }
  return undefined;
};

describe("checkFlow", () => {
  it("refuses every limit outside its range, naming the field", () => {
    fc.assert(
      fc.property(fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 1001 }), fc.double({ noInteger: true }), fc.string()), (limit) => {
        expect(paramOf(() => checkFlow({ concurrency: { limit } }))).toBe("concurrency.limit");
      }),
    );
    fc.assert(
      fc.property(fc.oneof(fc.integer({ max: 99 }), fc.integer({ min: 86_400_001 })), (period_ms) => {
        expect(paramOf(() => checkFlow({ throttle: { limit: 1, period_ms } }))).toBe("throttle.period_ms");
      }),
    );
  });

  it("accepts limits in range, with or without a key", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.boolean(), (limit, keyed) => {
        const key = keyed ? { key: "{{ input.customer }}" } : {};
        expect(checkFlow({ concurrency: { limit, ...key } })).toEqual({ concurrency: { limit, ...key } });
      }),
    );
  });

  it("refuses a key reading a step or a secret, or two different keys", () => {
    expect(paramOf(() => checkFlow({ concurrency: { limit: 1, key: "{{ steps.a.output }}" } }))).toBe("concurrency.key");
    expect(paramOf(() => checkFlow({ concurrency: { limit: 1, key: "{{ secrets.x }}" } }))).toBe("concurrency.key");
    expect(paramOf(() => checkFlow({ concurrency: { limit: 1, key: "" } }))).toBe("concurrency.key");
    expect(
      paramOf(() =>
        checkFlow({ concurrency: { limit: 1, key: "{{ input.a }}" }, throttle: { limit: 1, period_ms: 100, key: "{{ input.b }}" } }),
      ),
    ).toBe("throttle.key");
  });
});

describe("keyOf", () => {
  it("renders the template over the input, as text, bounded", () => {
    expect(keyOf("{{ input.c }}", { c: "x" })).toBe("x");
    expect(keyOf("{{ input.n }}", { n: 5 })).toBe("5");
    expect(keyOf("{{ input.c }}-{{ input.n }}", { c: "x", n: 5 })).toBe("x-5");
    expect(keyOf(undefined, { c: "x" })).toBe("");
    // A field the input lacks: the empty key, never an error.
    expect(keyOf("{{ input.missing.deeper }}", {})).toBe("");
    fc.assert(
      fc.property(fc.string({ maxLength: 500 }), (c) => {
        const key = keyOf("{{ input.c }}", { c });
        expect(key.length).toBeLessThanOrEqual(FLOW_KEY_MAX_CHARS + 7);
        expect(keyOf("{{ input.c }}", { c })).toBe(key);
      }),
    );
  });
});

describe("held", () => {
  const run = { id: "run_1", input: { c: "x" }, due_at: 10 } as unknown as RunDoc;
  it("leaves a run of a workflow without flow control as it is", () => {
    expect(held(run, { id: "wf_1" }, 10)).toBe(run);
  });
  it("holds the others: no due time, its key after the workflow's id, why it waits", () => {
    const h = held(run, { id: "wf_1", concurrency: { limit: 2, key: "{{ input.c }}" } }, 10);
    expect(h.due_at).toBeUndefined();
    expect(h).toMatchObject({ flow_key: "wf_1/x", held_at: 10, queued_reason: "concurrency", flow: { concurrency: 2 } });
    const t = held(run, { id: "wf_1", throttle: { limit: 2, period_ms: 1000 } }, 10);
    expect(t).toMatchObject({ flow_key: "wf_1/", queued_reason: "throttle", flow: { throttle: { limit: 2, period_ms: 1000 } } });
  });
});

describe("windowOf", () => {
  it("places every instant in the one window of its period that holds it", () => {
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 86_400_000 }), fc.integer({ min: 0, max: 2 ** 45 }), (period, now) => {
        const { start, end } = windowOf(period, now);
        expect(start).toBeLessThanOrEqual(now);
        expect(end).toBeGreaterThan(now);
        expect(end - start).toBe(period);
        expect(start % period).toBe(0);
      }),
    );
  });
});
