import { outcomeOf, subscribes } from "../../../../services/webhook-dispatcher/dispatcher.logic";

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
