import { countsAgainstNode } from "../../moleculer.config";
import { toHttpError } from "../../services/gateway/http-errors";
import { fingerprintOf, withoutSecret } from "../../services/gateway/idempotency";
import { IdentityCache } from "../../services/gateway/identity-cache";
import { RateLimiter } from "../../services/gateway/rate-limiter";
import { matchRoute } from "../../services/gateway/routes";

const methodsFor = (path: string) => {
  const m = matchRoute("", path);
  return m.route ? [] : m.allowed;
};
import { ApiError } from "../../shared/errors";
import { checkPageNumbers } from "../../shared/pagination";
import type { Identity } from "../../shared/identity";

const identity = (key_id: string, org_id = "org_a"): Identity => ({
  key_id,
  org_id,
  environment: "live",
  scopes: ["org:admin"],
  status: "active",
  expires_at: null,
  api_version: "2026-11-01",
});

describe("RateLimiter", () => {
  it("admits max per window per key and resets with the next window", () => {
    const limiter = new RateLimiter(3, 1000, () => 1);
    const t = 10_000;
    expect([1, 2, 3, 4].map(() => limiter.hit("k", t).allowed)).toEqual([true, true, true, false]);
    expect(limiter.hit("other", t).allowed).toBe(true);
    expect(limiter.hit("k", t + 1000).allowed).toBe(true);
  });

  it("enforces each gateway's share of the cluster limit", () => {
    let nodes = 2;
    const limiter = new RateLimiter(10, 1000, () => nodes);
    const admitted = Array.from({ length: 10 }, () => limiter.hit("k", 0).allowed).filter(Boolean).length;
    expect(admitted).toBe(5);
    nodes = 1;
    expect(limiter.hit("k", 0)).toMatchObject({ allowed: true, limit: 10, remaining: 4 });
  });
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

describe("routes", () => {
  it("matches a method and path to an action with its path parameters", () => {
    const m = matchRoute("DELETE", "/orgs/org_1/members/mem%5F2");
    expect(m.route?.action).toBe("orgs.removeMember");
    expect(m.route && "params" in m ? m.params : undefined).toEqual({ id: "org_1", member_id: "mem_2" });
    expect(matchRoute("GET", "/api-keys/%E0%A4%A").route).toBeUndefined();
  });
  it("knows which methods a path answers to", () => {
    expect(methodsFor("/api-keys")).toEqual(["POST", "GET"]);
    expect(methodsFor("/api-keys/key_1")).toEqual(["GET", "DELETE"]);
    expect(methodsFor("/nope")).toEqual([]);
  });
});

describe("toHttpError", () => {
  it("maps errors by their type, also as plain objects after a NATS hop", () => {
    expect(toHttpError(new ApiError("insufficient_scope", "x"))).toMatchObject({ status: 403, code: "insufficient_scope" });
    expect(toHttpError({ name: "ApiError", type: "resource_not_found", code: 404, message: "m", data: { param: "id" } })).toMatchObject({
      status: 404,
      param: "id",
    });
    expect(toHttpError({ name: "ValidationError", data: [{ type: "required", field: "name" }] })).toMatchObject({
      status: 400,
      code: "parameter_missing",
      param: "name",
    });
    expect(toHttpError({ name: "ServiceNotFoundError" })).toMatchObject({ status: 503, retryAfter: 1 });
  });
  it("hides anything unknown behind a 500 that leaks nothing", () => {
    const res = toHttpError(new Error("secret connection string mongodb://u:p@h"));
    expect(res).toMatchObject({ status: 500, code: "internal_error" });
    expect(res.message).not.toContain("mongodb");
  });
});

describe("RateLimiter.check", () => {
  it("tells whether a request would be admitted without counting it", () => {
    const limiter = new RateLimiter(2, 1000, () => 1);
    expect(limiter.check("a", 0).allowed).toBe(true);
    limiter.hit("a", 0);
    limiter.hit("a", 0);
    expect(limiter.check("a", 0)).toMatchObject({ allowed: false, remaining: 0 });
    expect(limiter.check("a", 1000).allowed).toBe(true);
  });
});

describe("idempotency fingerprints and secrets", () => {
  it("differ by calling key, method, path, query and body", () => {
    const base = fingerprintOf("key_a", "POST", "/v1/x", "a=1", { b: 1 });
    expect(
      new Set([
        base,
        fingerprintOf("key_b", "POST", "/v1/x", "a=1", { b: 1 }),
        fingerprintOf("key_a", "POST", "/v1/y", "a=1", { b: 1 }),
        fingerprintOf("key_a", "POST", "/v1/x", "a=2", { b: 1 }),
        fingerprintOf("key_a", "POST", "/v1/x", "a=1", { b: 2 }),
      ]).size,
    ).toBe(5);
  });

  it("keep an answer without its secret field", () => {
    expect(withoutSecret({ data: { id: "key_1", key: "svc_live_x" } }, "key")).toEqual({
      body: { data: { id: "key_1", key: null } },
      redacted: "key",
    });
    expect(withoutSecret({ error: { code: "x" } }, "key")).toEqual({ body: { error: { code: "x" } }, redacted: null });
  });
});

describe("checkPageNumbers", () => {
  it("takes plain decimal digits only", () => {
    expect(() => checkPageNumbers({ page: "12", per_page: "100", limit: "5" })).not.toThrow();
    for (const [param, value] of [
      ["page", "1e1"],
      ["per_page", "0x10"],
      ["limit", "-1"],
      ["page", ["1", "2"]],
    ] as const) {
      expect(() => checkPageNumbers({ [param]: value })).toThrow(expect.objectContaining({ type: "parameter_invalid", data: { param } }));
    }
  });
});

describe("the circuit breaker's check", () => {
  it("counts a node's own failures, not the shared store's or another service's", () => {
    expect(countsAgainstNode(new ApiError("internal_error", "x"))).toBe(true);
    expect(countsAgainstNode({ name: "RequestTimeoutError", code: 504 })).toBe(true);
    expect(countsAgainstNode(new ApiError("storage_unavailable", "x"))).toBe(false);
    expect(countsAgainstNode({ type: "service_unavailable", code: 503 })).toBe(false);
    expect(countsAgainstNode(new ApiError("parameter_invalid", "x"))).toBe(false);
  });
});
