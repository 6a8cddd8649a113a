import { HookCache, type HookEntry } from "../../../../services/workflows/hook-cache";

const entry = (id: string, org = "org_1"): HookEntry => ({
  tenant: { org_id: org, environment: "live" },
  workflowId: "wf_1",
  trigger: { type: "webhook", verify: { scheme: "none" } },
  hook: { id },
  stored: null,
});

describe("HookCache", () => {
  it("loads each id once, however many ask at once, and answers later asks from memory", async () => {
    let loads = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((ok) => (release = ok));
    const cache = new HookCache(async (id) => {
      loads += 1;
      await gate;
      return entry(id);
    });
    const asks = Promise.all([cache.get("hk_a", 0), cache.get("hk_a", 0), cache.get("hk_a", 0)]);
    release();
    expect((await asks).map((e) => e?.hook.id)).toEqual(["hk_a", "hk_a", "hk_a"]);
    await cache.get("hk_a", 1000);
    expect(loads).toBe(1);
  });

  it("reads again after its time limit, sooner for an unknown id", async () => {
    let loads = 0;
    const cache = new HookCache(async (id) => (loads++, id === "hk_known" ? entry(id) : null), 30_000, 5_000);
    await cache.get("hk_known", 0);
    await cache.get("hk_gone", 0);
    await cache.get("hk_known", 29_999);
    await cache.get("hk_gone", 4_999);
    expect(loads).toBe(2);
    await cache.get("hk_gone", 5_000);
    await cache.get("hk_known", 30_000);
    expect(loads).toBe(4);
  });

  it("forgets by id and by tenant, and keeps no load that was under way when it forgot", async () => {
    let loads = 0;
    let release: () => void = () => undefined;
    let gate = Promise.resolve();
    const cache = new HookCache(async (id) => {
      loads += 1;
      await gate;
      return entry(id, id === "hk_b" ? "org_2" : "org_1");
    });
    await cache.get("hk_a", 0);
    await cache.get("hk_b", 0);
    cache.forget(["hk_a"]);
    cache.forgetTenant({ org_id: "org_2" });
    await cache.get("hk_a", 1);
    await cache.get("hk_b", 1);
    expect(loads).toBe(4);
    gate = new Promise<void>((ok) => (release = ok));
    const loading = cache.get("hk_c", 2);
    cache.forget(["hk_c"]);
    release();
    await loading;
    await cache.get("hk_c", 3);
    expect(loads).toBe(6);
  });

  it("holds at most its bound, dropping the oldest", async () => {
    let loads = 0;
    const cache = new HookCache(async (id) => (loads++, entry(id)), 30_000, 5_000, 2);
    for (const id of ["hk_1", "hk_2", "hk_3"]) await cache.get(id, 0);
    await cache.get("hk_3", 1);
    await cache.get("hk_1", 1);
    expect(loads).toBe(4);
  });
});
