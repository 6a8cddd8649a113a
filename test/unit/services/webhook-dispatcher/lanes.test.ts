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
