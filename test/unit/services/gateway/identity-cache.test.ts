import { IdentityCache } from "../../../../services/gateway/identity-cache";
import type { Identity } from "../../../../shared/api/identity";

const identity = (key_id: string, org_id = "org_a"): Identity => ({
  key_id,
  key_name: `name of ${key_id}`,
  org_id,
  environment: "live",
  scopes: ["org:admin"],
  status: "active",
  expires_at: null,
  api_version: "2026-11-01",
});

describe("IdentityCache", () => {
  it("looks a token up once, then answers from memory until invalidated", async () => {
    let lookups = 0;
    const cache = new IdentityCache(async () => {
      lookups += 1;
      return identity("key_1");
    }, 60_000);
    await Promise.all([cache.get("t"), cache.get("t"), cache.get("t")]);
    await cache.get("t");
    expect(lookups).toBe(1);
    cache.invalidate({ key_id: "key_1" });
    expect(cache.wasRevoked("key_1")).toBe(true);
    await cache.get("t");
    expect(lookups).toBe(2);
  });

  it("does not cache a lookup that raced with an invalidation", async () => {
    let release!: () => void;
    const cache = new IdentityCache(() => new Promise<Identity>((r) => (release = () => r(identity("key_2")))), 60_000);
    const pending = cache.get("t");
    cache.invalidate({ org_id: "org_zzz" });
    release();
    await pending;
    expect(cache.size).toBe(0);
  });

  it("drops every key of an organization on an org invalidation", async () => {
    const cache = new IdentityCache(async (t) => identity(`key_${t}`, "org_x"), 60_000);
    await cache.get("1");
    await cache.get("2");
    cache.invalidate({ org_id: "org_x" });
    expect(cache.size).toBe(0);
    expect(cache.wasRevoked("key_1")).toBe(false);
  });
});
