import { Lanes } from "../../../../services/webhook-dispatcher/lanes";

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
