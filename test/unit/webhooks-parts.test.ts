import { outcomeOf } from "../../services/webhook-dispatcher/dispatcher.logic";
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

describe("Lanes with a rate", () => {
  it("spaces a throttled key's starts 1/rate apart, holding no slot while it waits for its start", async () => {
    const starts: [string, number][] = [];
    const lanes = new Lanes<string>(1, 1, async (item) => {
      starts.push([item, Date.now()]);
    });
    const startedAll = async (n: number) => {
      while (starts.length < n) await new Promise((r) => setTimeout(r, 5));
    };
    lanes.setRate("slow", 20);
    const t0 = Date.now();
    for (let i = 0; i < 4; i++) lanes.push("slow", `slow${i}`);
    await startedAll(1);
    // One slot in all: the throttled key waits for its next start without it, so another key goes first.
    lanes.push("fast", "fast0");
    await startedAll(2);
    expect(starts.map(([item]) => item)).toEqual(["slow0", "fast0"]);
    await startedAll(5);
    const slow = starts.filter(([item]) => item.startsWith("slow")).map(([, at]) => at);
    // The i-th start no earlier than i gaps of 50 ms after the first could be.
    for (let i = 1; i < slow.length; i++) expect(slow[i] - t0).toBeGreaterThanOrEqual(50 * i);
    await lanes.idle();
  });

  it("keeps rate x 2 s of a throttled key in memory and hands out store slots at its rate after them", () => {
    const lanes = new Lanes<number>(32, 1024, () => new Promise<void>(() => undefined));
    expect(lanes.room("any")).toBe(Infinity);
    lanes.setRate("k", 10);
    expect(lanes.room("k")).toBe(20);
    for (let i = 0; i < 5; i++) lanes.push("k", i);
    // None started yet: each waits for its start time.
    expect(lanes.room("k")).toBe(15);
    // After the five queued (100 ms apart), then one after another; `ahead` counts ones about to be queued.
    expect([lanes.nextSlot("k", 1000), lanes.nextSlot("k", 1000), lanes.nextSlot("k", 1000, 3)]).toEqual([1500, 1600, 1800]);
    lanes.setRate("k", null);
    expect(lanes.room("k")).toBe(Infinity);
    lanes.takeQueued();
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
