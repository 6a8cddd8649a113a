import { deliveryId, outcomeOf, ownerOf, subscribes } from "../../../../services/webhook-dispatcher/dispatcher.logic";
import { isId, newId } from "../../../../shared/ids";

const attempt = (status_code: number | null) => ({ number: 1, at: "", status_code, duration_ms: 1, error: null });
const DELAYS = [1000, 2000, 3000, 4000];

describe("outcomeOf", () => {
  it("settles a 2xx and schedules the next wait after a failure, with at most 10 % jitter", () => {
    expect(outcomeOf({ attempts: [], series_start: 0 }, attempt(204), DELAYS, 0)).toEqual({ status: "succeeded", dueAt: null });
    expect(outcomeOf({ attempts: [], series_start: 0 }, attempt(500), DELAYS, 0, 0)).toEqual({ status: "pending", dueAt: 1000 });
    expect(outcomeOf({ attempts: [], series_start: 0 }, attempt(null), DELAYS, 0, 0.999).dueAt).toBe(1100);
    expect(outcomeOf({ attempts: [attempt(500), attempt(500)], series_start: 0 }, attempt(302), DELAYS, 10, 0).dueAt).toBe(3010);
  });

  it("fails the delivery at the fifth attempt of a series, counting from a redelivery's start", () => {
    const four = Array.from({ length: 4 }, () => attempt(500));
    expect(outcomeOf({ attempts: four, series_start: 0 }, attempt(500), DELAYS, 0)).toEqual({ status: "failed", dueAt: null });
    expect(outcomeOf({ attempts: [...four, attempt(500)], series_start: 5 }, attempt(500), DELAYS, 0, 0)).toEqual({
      status: "pending",
      dueAt: 1000,
    });
  });
});

describe("subscribes", () => {
  it("matches '*' and the listed types only", () => {
    expect(subscribes(["*"], "x.y")).toBe(true);
    expect(subscribes(["a.b"], "x.y")).toBe(false);
  });
});

describe("deliveryId", () => {
  it("is the same for one event and webhook wherever computed, a delivery id sorting by the event's time, and differs otherwise", () => {
    const [a, b] = [newId("evt"), newId("evt")];
    const id = deliveryId(a, "wh_1");
    expect(isId("del", id)).toBe(true);
    expect(deliveryId(a, "wh_1")).toBe(id);
    expect(id.slice(4, 14)).toBe(a.slice(4, 14));
    const others = [deliveryId(a, "wh_2"), deliveryId(b, "wh_1")];
    expect(new Set([id, ...others]).size).toBe(3);
    expect(deliveryId(b, "wh_1") >= id.slice(0, 14)).toBe(true);
  });
});

describe("ownerOf", () => {
  it("gives every event to one of the nodes, about evenly", () => {
    const peers = ["d1", "d2"];
    const owners = Array.from({ length: 1000 }, () => ownerOf(newId("evt"), peers));
    const d1 = owners.filter((o) => o === "d1").length;
    expect(owners.every((o) => peers.includes(o))).toBe(true);
    expect(d1).toBeGreaterThan(400);
    expect(d1).toBeLessThan(600);
  });
});
