import fc from "fast-check";
import { matchesType, passes, patternsOf, validPattern } from "../../../../services/workflows/trigger-match";

const event = (type: string, data: Record<string, unknown> = {}) => ({ id: "evt_1", type, created_at: "2024-01-01T00:00:00.000Z", data });

describe("event trigger patterns", () => {
  it("* stands for one whole segment", () => {
    expect(matchesType("order.*", "order.created")).toBe(true);
    expect(matchesType("order.*", "order.created.late")).toBe(false);
    expect(matchesType("*.created", "order.created")).toBe(true);
    expect(matchesType("order.*.late", "order.created.late")).toBe(true);
    expect(matchesType("order.*", "orders.created")).toBe(false);
    expect(matchesType("order.created", "order.created")).toBe(true);
  });

  it("every valid pattern that matches a type is among the type's candidates (the one indexed read finds it)", () => {
    const segment = fc.stringMatching(/^[a-z][a-z0-9_]{0,5}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(segment, fc.boolean()), { minLength: 2, maxLength: 12 }), (parts) => {
        const type = parts.map(([s]) => s).join(".");
        const pattern = parts.map(([s, star]) => (star ? "*" : s)).join(".");
        if (!pattern.includes("*") || !validPattern(pattern)) return;
        expect(matchesType(pattern, type)).toBe(true);
        expect(patternsOf(type)).toContain(pattern);
      }),
    );
    expect(patternsOf("a.b.c")).toEqual(["*.b.c", "*.*.c", "*.b.*", "a.*.c", "a.*.*", "a.b.*"]);
    expect(patternsOf(Array(50).fill("a").join(".")).length).toBe(1275);
    expect(validPattern("a.*.*.*")).toBe(false);
  });

  it("a filter decides over the event; one that fails does not pass and says why", () => {
    const trigger = { type: "event" as const, event_type: "order.*", filter: "event.data.amount >= 500" };
    expect(passes(trigger, event("order.created", { amount: 900 }))).toEqual({ ok: true });
    expect(passes(trigger, event("order.created", { amount: 10 }))).toEqual({ ok: false });
    expect(passes(trigger, event("payment.created", { amount: 900 }))).toEqual({ ok: false });
    expect(passes(trigger, event("order.created", {})).why).toMatch(/the filter failed: No such key: amount/);
    expect(passes({ ...trigger, filter: "{{ event.type.endsWith('created') }}" }, event("order.created"))).toEqual({ ok: true });
    expect(passes({ ...trigger, filter: "event.data" }, event("order.created")).why).toMatch(/not true or false/);
  });
});
