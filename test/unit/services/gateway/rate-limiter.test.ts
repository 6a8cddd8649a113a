import { RateLimiter } from "../../../../services/gateway/rate-limiter";

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
