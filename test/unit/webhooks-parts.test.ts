import { deliveryId, outcomeOf, ownerOf } from "../../services/webhook-dispatcher/dispatcher.logic";
import { isId, newId } from "../../shared/ids";
import { Lanes } from "../../services/webhook-dispatcher/lanes";
import { subscribes } from "../../services/webhook-dispatcher/dispatcher.logic";
import { checkSubscription, targetOf, type WebhookDoc } from "../../services/webhooks/webhooks.logic";
import { checkEmittable } from "../../services/events/events.logic";

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

describe("Lanes", () => {
  it("caps each key's concurrency and lets other keys pass a blocked one", async () => {
    const started: string[] = [];
    const release: (() => void)[] = [];
    const lanes = new Lanes<string>(2, 3, (item) => {
      started.push(item);
      return item.startsWith("slow") ? new Promise<void>((r) => release.push(r)) : Promise.resolve();
    });
    for (let i = 0; i < 5; i++) lanes.push("slow", `slow${i}`);
    for (let i = 0; i < 3; i++) lanes.push("fast", `fast${i}`);
    await new Promise((r) => setImmediate(r));
    expect(started.filter((s) => s.startsWith("slow"))).toEqual(["slow0", "slow1"]);
    expect(started.filter((s) => s.startsWith("fast"))).toEqual(["fast0", "fast1", "fast2"]);
    expect(lanes.size).toBe(5);
    release.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(started).toContain("slow2");
    expect(lanes.takeQueued()).toEqual(["slow3", "slow4"]);
    release.splice(0).forEach((r) => r());
    await lanes.idle();
    expect(lanes.size).toBe(0);
  });
});

describe("webhook subscriptions", () => {
  it("takes '*' alone, custom names, and known system types", () => {
    expect(checkSubscription(["*"])).toEqual(["*"]);
    expect(checkSubscription(["order.created", "api_key.revoked", "order.created"])).toEqual(["order.created", "api_key.revoked"]);
    expect(() => checkSubscription(["*", "a.b"])).toThrow(/cannot be combined/);
    expect(() => checkSubscription(["workflow.started"])).toThrow(/Unknown event type/);
    expect(() => checkSubscription(["ORDER"])).toThrow(/not an event type/);
    expect(subscribes(["*"], "x.y")).toBe(true);
    expect(subscribes(["a.b"], "x.y")).toBe(false);
  });

  it("signs with the current secret first and drops rotated secrets once expired", () => {
    const doc = {
      secret: "whsec_new",
      previous_secrets: [
        { secret: "whsec_recent", expires_at: "2026-11-23T00:00:00.000Z" },
        { secret: "whsec_old", expires_at: "2026-11-21T00:00:00.000Z" },
      ],
    } as unknown as WebhookDoc;
    expect(targetOf(doc, Date.parse("2026-11-22T12:00:00.000Z")).secrets).toEqual(["whsec_new", "whsec_recent"]);
  });
});

describe("checkEmittable", () => {
  it("measures data as JSON bytes", () => {
    expect(checkEmittable("a.b", undefined)).toEqual({});
    expect(() => checkEmittable("a.b", { s: "é".repeat(33_000) })).toThrow(/65536/);
  });
});
