import fc from "fast-check";
import { ApiError } from "../../../../shared/errors";
import {
  checkFlow,
  debounced,
  debounceReleased,
  FLOW_KEY_MAX_CHARS,
  held,
  keyOf,
  windowOf,
} from "../../../../services/workflows/flow-control.logic";
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

  it("names a field it does not take by its path, whatever its name", () => {
    expect(paramOf(() => checkFlow({ concurrency: { limit: 1, extra: 1 } }))).toBe("concurrency.extra");
    expect(paramOf(() => checkFlow({ throttle: { limit: 1, period_ms: 100, "a b": 1 } }))).toBe('throttle["a b"]');
    expect(paramOf(() => checkFlow({ debounce: { period_ms: 100, "": 1 } }))).toBe('debounce[""]');
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
    expect(paramOf(() => checkFlow({ throttle: { limit: 1, period_ms: 100, key: "{{ steps.a.output }}" } }))).toBe("throttle.key");
  });

  it("holds the API reference's rule: text without {{ }} is a constant key, a blank one is refused", () => {
    // shared/api/schemas/flow.ts states it as `pattern: "\\S"`.
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 50 }).filter((s) => !s.includes("{{")),
        (key) => {
          const param = paramOf(() => checkFlow({ debounce: { period_ms: 100, key } }));
          expect(param).toBe(/\S/.test(key) ? undefined : "debounce.key");
        },
      ),
    );
    expect(checkFlow({ concurrency: { limit: 1, key: "all" } })).toEqual({ concurrency: { limit: 1, key: "all" } });
    expect(keyOf("all", { a: 1 })).toBe("all");
  });

  it("counts a throttle over another key than the concurrency's under its own key", () => {
    const run = { id: "run_1", input: { a: "x", b: "y" }, due_at: 10 } as unknown as RunDoc;
    const wf = {
      id: "wf_1",
      concurrency: { limit: 1, key: "{{ input.a }}" },
      throttle: { limit: 2, period_ms: 100, key: "{{ input.b }}" },
    };
    expect(held(run, wf, 10)).toMatchObject({
      flow_key: "wf_1/x",
      flow: { concurrency: 1, throttle: { limit: 2, period_ms: 100, key: "wf_1/y" } },
    });
    const same = { ...wf, throttle: { ...wf.throttle, key: "{{ input.a }}" } };
    expect(held(run, same, 10).flow?.throttle).toEqual({ limit: 2, period_ms: 100 });
  });
});

describe("debounce", () => {
  it("checks its period and its max wait", () => {
    expect(checkFlow({ debounce: { period_ms: 1000, max_wait_ms: 5000, key: "{{ input.c }}" } })).toEqual({
      debounce: { period_ms: 1000, max_wait_ms: 5000, key: "{{ input.c }}" },
    });
    expect(paramOf(() => checkFlow({ debounce: { period_ms: 1000, max_wait_ms: 99 } }))).toBe("debounce.max_wait_ms");
    expect(paramOf(() => checkFlow({ debounce: { period_ms: 50 } }))).toBe("debounce.period_ms");
    expect(paramOf(() => checkFlow({ debounce: { period_ms: 1000, key: 1 } }))).toBe("debounce.key");
  });

  it("moves a pending run's release with each start, never past its deadline", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 10_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        (period, now, deadline) => {
          const pending = { debounce_deadline: deadline } as RunDoc;
          const { $set } = debounced(pending, { i: 1 }, period, now);
          expect($set.release_at).toBe(Math.min(now + period, deadline));
          expect($set.input).toEqual({ i: 1 });
        },
      ),
    );
  });

  it("holds a debounced run pending, outside its key's line until its burst ends", () => {
    const run = { id: "run_1", input: { c: "x" }, due_at: 10 } as unknown as RunDoc;
    const h = held(
      run,
      { id: "wf_1", debounce: { period_ms: 100, max_wait_ms: 300, key: "{{ input.c }}" }, concurrency: { limit: 1 } },
      10,
    );
    expect(h).toMatchObject({
      debounce_key: "wf_1/x",
      debounce_deadline: 310,
      release_at: 110,
      queued_reason: "debounce",
      flow_key: "wf_1/",
    });
    expect(h.held_at).toBeUndefined();
    expect(debounceReleased(h, 200)).toMatchObject({ $set: { held_at: 200, queued_reason: "concurrency" } });
    const alone = held(run, { id: "wf_1", debounce: { period_ms: 100 } }, 10);
    expect(debounceReleased(alone, 200)).toMatchObject({ $set: { due_at: 200 } });
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
