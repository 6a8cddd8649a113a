import { ShapeAbsence } from "../../../../services/workflows/shape-absence";

const acme = { org_id: "org_1", environment: "live" as const };
const other = { org_id: "org_2", environment: "live" as const };

/** A clock the test moves. */
function clock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe("ShapeAbsence", () => {
  it("answers a type read as absent without a read until its time, counted from when the read began", () => {
    const c = clock();
    const absence = new ShapeAbsence(c.now, 1000);
    const begun = absence.begin();
    c.advance(300); // the read takes this long
    absence.keep(acme, ["pay.done"], begun);
    expect(absence.unknown(acme, ["pay.done", "order.paid"])).toEqual(["order.paid"]);
    c.advance(699);
    expect(absence.unknown(acme, ["pay.done"])).toEqual([]);
    c.advance(1);
    expect(absence.unknown(acme, ["pay.done"])).toEqual(["pay.done"]);
  });

  it("keeps each tenant's answers apart", () => {
    const absence = new ShapeAbsence(clock().now, 1000);
    absence.keep(acme, ["pay.done"], absence.begin());
    expect(absence.unknown(other, ["pay.done"])).toEqual(["pay.done"]);
    expect(absence.unknown({ ...acme, environment: "test" }, ["pay.done"])).toEqual(["pay.done"]);
  });

  it("forgets a type made live at once, and keeps no answer of a read under way meanwhile", () => {
    const absence = new ShapeAbsence(clock().now, 1000);
    absence.keep(acme, ["pay.done"], absence.begin());
    const underWay = absence.begin();
    absence.drop(acme, "pay.done");
    expect(absence.unknown(acme, ["pay.done"])).toEqual(["pay.done"]);
    absence.keep(acme, ["pay.done", "order.paid"], underWay);
    expect(absence.unknown(acme, ["pay.done", "order.paid"])).toEqual(["pay.done", "order.paid"]);
    // A read begun after the drop is kept.
    absence.keep(acme, ["order.paid"], absence.begin());
    expect(absence.unknown(acme, ["order.paid"])).toEqual([]);
  });

  it("holds at most `max` answers, the oldest going first", () => {
    const absence = new ShapeAbsence(clock().now, 1000, 2);
    absence.keep(acme, ["a.one", "a.two", "a.three"], absence.begin());
    expect(absence.unknown(acme, ["a.one", "a.two", "a.three"])).toEqual(["a.one"]);
  });
});
