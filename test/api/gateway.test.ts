import { api, expectError, startPlatform, type Platform } from "../helpers/platform";

let p: Platform;
let acme: { org: { id: string }; live: string; test: string };

beforeAll(async () => {
  p = await startPlatform({ RATE_LIMIT_MAX: "1000" });
  acme = await p.createOrg("Acme");
});
afterAll(() => p.stop());

describe("authentication", () => {
  it("answers 401 missing_api_key without an Authorization header", async () => {
    expectError(await api(p.baseUrl, "GET", "/api-keys"), 401, "missing_api_key");
  });

  it("answers 401 invalid_api_key for a malformed, unknown or non-Bearer key", async () => {
    expectError(await api(p.baseUrl, "GET", "/api-keys", { key: "nope" }), 401, "invalid_api_key");
    expectError(await api(p.baseUrl, "GET", "/api-keys", { key: `svc_live_${"a".repeat(32)}` }), 401, "invalid_api_key");
    const basic = await api(p.baseUrl, "GET", "/api-keys", { headers: { authorization: `Basic ${acme.live}` } });
    expectError(basic, 401, "invalid_api_key");
  });

  it("never echoes the key in an error", async () => {
    const res = await api(p.baseUrl, "GET", "/api-keys", { key: `svc_live_${"b".repeat(32)}` });
    expect(JSON.stringify(res.body)).not.toContain("b".repeat(32));
  });
});

describe("conventions of every response", () => {
  it("carries Request-Id and the resolved Service-Version on success and failure", async () => {
    const ok = await api(p.baseUrl, "GET", "/api-keys", { key: acme.live });
    expect(ok.headers["request-id"]).toMatch(/^req_[0-9a-z]{26}$/);
    expect(ok.headers["service-version"]).toBe("2026-11-01");
    const bad = await api(p.baseUrl, "GET", "/nowhere", { key: acme.live });
    expect(bad.headers["request-id"]).toMatch(/^req_/);
    const ids = new Set<string>();
    for (let i = 0; i < 5; i += 1) ids.add((await api(p.baseUrl, "GET", "/api-keys", { key: acme.live })).headers["request-id"] as string);
    expect(ids.size).toBe(5);
  });

  it("answers 404 route_not_found for an unknown path and 405 with Allow for a known path's wrong verb", async () => {
    expectError(await api(p.baseUrl, "GET", "/nowhere", { key: acme.live }), 404, "route_not_found");
    expectError(await api(p.baseUrl, "GET", "/api-keys/x/y", { key: acme.live }), 404, "route_not_found");
    const res = await api(p.baseUrl, "PUT", "/api-keys", { key: acme.live, body: {} });
    expectError(res, 405, "method_not_allowed");
    expect(res.headers.allow).toBe("POST, GET");
    const one = await api(p.baseUrl, "PATCH", "/api-keys/key_x", { key: acme.live, body: {} });
    expectError(one, 405, "method_not_allowed");
    expect(one.headers.allow).toBe("GET, DELETE");
  });
});

describe("request bodies", () => {
  it("answers 400 invalid_json for malformed JSON and for a body that is not an object", async () => {
    const headers = { "content-type": "application/json" };
    expectError(await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, raw: "{name:", headers }), 400, "invalid_json");
    expectError(await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, raw: "[1,2]", headers }), 400, "invalid_json");
  });

  it("answers 415 for a body that is not JSON", async () => {
    const res = await api(p.baseUrl, "POST", "/api-keys", {
      key: acme.live,
      raw: "name=x",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expectError(res, 415, "unsupported_media_type");
  });

  it("answers 413 for a body over 1 MiB and creates nothing", async () => {
    const before = (await api(p.baseUrl, "GET", "/api-keys", { key: acme.live })).body.meta.total;
    const res = await api(p.baseUrl, "POST", "/api-keys", {
      key: acme.live,
      body: { name: "x".repeat(1024 * 1024 + 10), scopes: ["events:read"] },
    });
    expectError(res, 413, "payload_too_large");
    const after = (await api(p.baseUrl, "GET", "/api-keys", { key: acme.live })).body.meta.total;
    expect(after).toBe(before);
  });
});

describe("Service-Version", () => {
  it("resolves a date to the latest version on or before it and echoes it", async () => {
    const res = await api(p.baseUrl, "GET", "/api-keys", { key: acme.live, headers: { "service-version": "2027-03-15" } });
    expect(res.status).toBe(200);
    expect(res.headers["service-version"]).toBe("2026-11-01");
  });

  it("answers 400 invalid_version for a malformed date and unsupported_version before the first", async () => {
    for (const v of ["yesterday", "2026-13-01", "2026-02-30", "20261101"]) {
      expectError(
        await api(p.baseUrl, "GET", "/api-keys", { key: acme.live, headers: { "service-version": v } }),
        400,
        "invalid_version",
        "Service-Version",
      );
    }
    expectError(
      await api(p.baseUrl, "GET", "/api-keys", { key: acme.live, headers: { "service-version": "2020-01-01" } }),
      400,
      "unsupported_version",
      "Service-Version",
    );
  });
});

describe("Idempotency-Key", () => {
  it("replays the first response for the same key and body, and creates one key only", async () => {
    const body = { name: "idem", scopes: ["events:read"] };
    const headers = { "idempotency-key": "create-idem-1" };
    const first = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body, headers });
    expect(first.status).toBe(201);
    const second = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body, headers });
    expect(second.status).toBe(201);
    expect(second.headers["idempotent-replayed"]).toBe("true");
    // The key's secret is shown once: the replay answers the key without it, and says so.
    expect(second.headers["secret-redacted"]).toBe("key");
    expect(second.body).toEqual({ data: { ...first.body.data, key: null } });
    expect(first.headers["idempotent-replayed"]).toBeUndefined();
    const list = await api(p.baseUrl, "GET", "/api-keys?per_page=100", { key: acme.live });
    expect(list.body.data.filter((k: { name: string }) => k.name === "idem")).toHaveLength(1);
  });

  it("answers 409 idempotency_key_reused for the same key with another body", async () => {
    const headers = { "idempotency-key": "create-idem-2" };
    expect(
      (await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "a", scopes: ["events:read"] }, headers })).status,
    ).toBe(201);
    const res = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "b", scopes: ["events:read"] }, headers });
    expectError(res, 409, "idempotency_key_reused", "Idempotency-Key");
  });

  it("replays a validation error too, and keeps keys of other environments apart", async () => {
    const headers = { "idempotency-key": "bad-1" };
    const first = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "", scopes: ["events:read"] }, headers });
    expect(first.status).toBe(400);
    const again = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "", scopes: ["events:read"] }, headers });
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.body.error.code).toBe(first.body.error.code);
    const other = await api(p.baseUrl, "POST", "/api-keys", { key: acme.test, body: { name: "ok", scopes: ["events:read"] }, headers });
    expect(other.status).toBe(201);
  });

  it("gives concurrent requests with one key one creation", async () => {
    const headers = { "idempotency-key": "race-1" };
    const body = { name: "race", scopes: ["events:read"] };
    const all = await Promise.all(Array.from({ length: 8 }, () => api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body, headers })));
    const created = all.filter((r) => r.status === 201);
    const ids = new Set(created.map((r) => r.body.data.id));
    expect(ids.size).toBe(1);
    for (const r of all.filter((x) => x.status !== 201)) expectError(r, 409, "idempotency_key_in_use");
  });
});

describe("rate limits", () => {
  it("answers 429 rate_limited with RateLimit-* and Retry-After past the per-key limit", async () => {
    const q = await startPlatform({ RATE_LIMIT_MAX: "5", RATE_LIMIT_WINDOW_MS: "60000" });
    try {
      const org = await q.createOrg();
      const statuses: number[] = [];
      let last;
      for (let i = 0; i < 7; i += 1) {
        last = await api(q.baseUrl, "GET", "/api-keys", { key: org.live });
        statuses.push(last.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
      expectError(last!, 429, "rate_limited");
      expect(last!.headers["ratelimit-limit"]).toBe("5");
      expect(last!.headers["ratelimit-remaining"]).toBe("0");
      expect(Number(last!.headers["retry-after"])).toBeGreaterThan(0);
      // Another key has its own budget.
      const other = await api(q.baseUrl, "GET", "/api-keys", { key: org.test });
      expect(other.status).toBe(200);
      expect(other.headers["ratelimit-remaining"]).toBe("4");
    } finally {
      await q.stop();
    }
  });
});

describe("a service without a live node", () => {
  it("answers 503 service_unavailable with Retry-After", async () => {
    const q = await startPlatform();
    try {
      const org = await q.createOrg();
      expect((await api(q.baseUrl, "GET", "/orgs/" + org.org.id, { key: org.live })).status).toBe(200);
      await q.broker.destroyService(q.broker.getLocalService("orgs"));
      const res = await api(q.baseUrl, "GET", "/orgs/" + org.org.id, { key: org.live });
      expectError(res, 503, "service_unavailable");
      expect(res.headers["retry-after"]).toBe("1");
    } finally {
      await q.stop();
    }
  });
});
