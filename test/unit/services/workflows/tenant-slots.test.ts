import fc from "fast-check";
import { sharesOf, TenantSlots } from "../../../../services/workflows/tenant-slots";

const A = { org_id: "org_a", environment: "live" } as const;
const B = { org_id: "org_b", environment: "live" } as const;
const Btest = { org_id: "org_b", environment: "test" } as const;

describe("TenantSlots", () => {
  it("keeps a quarter of the slots from any one organization, and three eighths from one environment", () => {
    expect(sharesOf(64)).toEqual({ total: 64, perOrg: 48, perEnvironment: 40 });
    expect(sharesOf(1)).toEqual({ total: 1, perOrg: 1, perEnvironment: 1 });
    const slots = new TenantSlots(sharesOf(64));
    while (slots.room(B)) slots.take(B);
    expect(slots.active).toBe(40);
    while (slots.room(Btest)) slots.take(Btest);
    expect(slots.active).toBe(48);
    expect(slots.room(A)).toBe(true);
    expect([slots.room(B), slots.room(Btest)]).toEqual([false, false]);
    slots.give(Btest);
    // Org B has room again, its live environment does not.
    expect([slots.room(B), slots.room(Btest)]).toEqual([false, true]);
  });

  it("hands turns round-robin to the tenants with room", () => {
    const slots = new TenantSlots({ total: 10, perOrg: 3, perEnvironment: 3 });
    slots.waiting(A);
    slots.waiting(B);
    slots.waiting(A);
    const order = [];
    for (let i = 0; i < 6; i += 1) {
      const t = slots.next();
      if (!t) break;
      slots.take(t);
      order.push(t.org_id);
    }
    expect(order).toEqual(["org_a", "org_b", "org_a", "org_b", "org_a", "org_b"]);
    expect(slots.next()).toBeUndefined();
    slots.rested(A);
    slots.give(A);
    expect(slots.next()).toBeUndefined();
    expect(slots.queued).toBe(1);
  });

  it("never lets a tenant past its shares or the node past its total, whatever the order of takes and gives", () => {
    const tenants = [A, B, Btest, { org_id: "org_c", environment: "test" } as const];
    const op = fc.record({ t: fc.integer({ min: 0, max: 3 }), take: fc.boolean() });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.array(op, { maxLength: 200 }), (total, ops) => {
        const shares = sharesOf(total);
        const slots = new TenantSlots(shares);
        const held = tenants.map(() => 0);
        for (const { t, take } of ops) {
          if (take && slots.room(tenants[t])) {
            slots.take(tenants[t]);
            held[t] += 1;
          } else if (!take && held[t] > 0) {
            slots.give(tenants[t]);
            held[t] -= 1;
          }
          const orgB = held[1] + held[2];
          expect(held.every((n) => n <= shares.perEnvironment) && orgB <= shares.perOrg).toBe(true);
          expect(slots.active).toBe(held.reduce((a, b) => a + b, 0));
          expect(slots.active).toBeLessThanOrEqual(total);
        }
      }),
    );
  });
});
