import { waitFor } from "../../tools/procs";
import { api, expectError, startPlatform, type Platform } from "../helpers/platform";

let p: Platform;
let acme: { org: { id: string }; live: string; test: string };
let globex: { org: { id: string }; live: string; test: string };

beforeAll(async () => {
  p = await startPlatform();
  acme = await p.createOrg("Acme");
  globex = await p.createOrg("Globex");
});
afterAll(() => p.stop());

const create = (key: string, body: unknown, headers: Record<string, string> = {}) =>
  api(p.baseUrl, "POST", "/api-keys", { key, body, headers });

describe("POST /api-keys", () => {
  it("creates a key whose secret is shown once, with the contract's fields", async () => {
    const res = await create(acme.live, { name: "CI deploys", scopes: ["workflows:read", "workflows:write"] });
    expect(res.status).toBe(201);
    const key = res.body.data;
    expect(key.id).toMatch(/^key_[0-9a-z]{26}$/);
    expect(key.key).toMatch(/^svc_live_[0-9A-Za-z]{32}$/);
    expect(key).toMatchObject({
      name: "CI deploys",
      scopes: ["workflows:read", "workflows:write"],
      environment: "live",
      status: "active",
      prefix: key.key.slice(0, 13),
      last4: key.key.slice(-4),
      revoked_at: null,
      expires_at: null,
      last_used_at: null,
    });
    expect(key.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    const again = await api(p.baseUrl, "GET", `/api-keys/${key.id}`, { key: acme.live });
    expect(again.status).toBe(200);
    expect(again.body.data.key).toBeUndefined();
    expect(JSON.stringify(again.body)).not.toContain(key.key.slice(9));
  });

  it("creates test keys with the svc_test_ prefix from a test key", async () => {
    const res = await create(acme.test, { name: "sandbox", scopes: ["events:read"] });
    expect(res.status).toBe(201);
    expect(res.body.data.key).toMatch(/^svc_test_/);
    expect(res.body.data.environment).toBe("test");
  });

  it("refuses to grant a scope the caller does not hold (no escalation)", async () => {
    const limited = (await create(acme.live, { name: "keys only", scopes: ["api-keys:write", "api-keys:read"] })).body.data.key;
    const ok = await create(limited, { name: "reader", scopes: ["api-keys:read"] });
    expect(ok.status).toBe(201);
    expectError(await create(limited, { name: "admin", scopes: ["org:admin"] }), 403, "insufficient_scope", "scopes[0]");
    expectError(
      await create(limited, { name: "wf", scopes: ["api-keys:read", "workflows:write"] }),
      403,
      "insufficient_scope",
      "scopes[1]",
    );
    expectError(
      await create(limited, { name: "other env", scopes: ["api-keys:read"], environment: "test" }),
      403,
      "insufficient_scope",
      "environment",
    );
  });

  it("lets org:admin create a key for the other environment", async () => {
    const res = await create(acme.live, { name: "test from live", scopes: ["events:write"], environment: "test" });
    expect(res.status).toBe(201);
    expect(res.body.data.key).toMatch(/^svc_test_/);
  });

  it("names the parameter that is missing, invalid or unknown", async () => {
    expectError(await create(acme.live, { scopes: ["events:read"] }), 400, "parameter_missing", "name");
    expectError(await create(acme.live, { name: "x" }), 400, "parameter_missing", "scopes");
    expectError(await create(acme.live, { name: "x", scopes: ["events:reed"] }), 400, "parameter_invalid", "scopes[0]");
    expectError(await create(acme.live, { name: "x", scopes: [] }), 400, "parameter_invalid", "scopes");
    expectError(await create(acme.live, { name: "", scopes: ["events:read"] }), 400, "parameter_invalid", "name");
    expectError(await create(acme.live, { name: 42, scopes: ["events:read"] }), 400, "parameter_invalid", "name");
    expectError(
      await create(acme.live, { name: "x", scopes: ["events:read"], environment: "prod" }),
      400,
      "parameter_invalid",
      "environment",
    );
    expectError(await create(acme.live, { name: "x", scopes: ["events:read"], colour: "red" }), 400, "parameter_unknown", "colour");
    expectError(
      await create(acme.live, { name: "x", scopes: ["events:read"], expires_at: "tomorrow" }),
      400,
      "parameter_invalid",
      "expires_at",
    );
    expectError(
      await create(acme.live, { name: "x", scopes: ["events:read"], expires_at: "2001-01-01T00:00:00Z" }),
      400,
      "parameter_invalid",
      "expires_at",
    );
  });

  it("needs api-keys:write", async () => {
    const reader = (await create(acme.live, { name: "reader", scopes: ["api-keys:read"] })).body.data.key;
    const res = await create(reader, { name: "nope", scopes: ["api-keys:read"] });
    expectError(res, 403, "insufficient_scope");
    expect(res.body.error.message).toContain("api-keys:write");
  });
});

describe("GET /api-keys and GET /api-keys/{id}", () => {
  it("lists the caller's environment's keys, newest first, paged", async () => {
    const org = await p.createOrg("Pager");
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) ids.push((await create(org.live, { name: `k${i}`, scopes: ["events:read"] })).body.data.id);
    const page1 = await api(p.baseUrl, "GET", "/api-keys?per_page=2", { key: org.live });
    expect(page1.status).toBe(200);
    expect(page1.body.meta).toEqual({ total: 6, page: 1, per_page: 2 });
    expect(page1.body.data.map((k: { id: string }) => k.id)).toEqual([ids[4], ids[3]]);
    const page3 = await api(p.baseUrl, "GET", "/api-keys?per_page=2&page=3", { key: org.live });
    expect(page3.body.data).toHaveLength(2);
    expect(page3.body.data[0].id).toBe(ids[0]);
    expect(page3.body.data[1].name).toBe("Default live key");
    const all = await api(p.baseUrl, "GET", "/api-keys", { key: org.live });
    expect(all.body.meta).toEqual({ total: 6, page: 1, per_page: 20 });
    expect(all.body.data.every((k: { environment: string; key?: string }) => k.environment === "live" && k.key === undefined)).toBe(true);
    const testSide = await api(p.baseUrl, "GET", "/api-keys", { key: org.test });
    expect(testSide.body.meta.total).toBe(1);
  });

  it("checks page and per_page", async () => {
    expectError(await api(p.baseUrl, "GET", "/api-keys?per_page=101", { key: acme.live }), 400, "parameter_invalid", "per_page");
    expectError(await api(p.baseUrl, "GET", "/api-keys?per_page=0", { key: acme.live }), 400, "parameter_invalid", "per_page");
    expectError(await api(p.baseUrl, "GET", "/api-keys?page=0", { key: acme.live }), 400, "parameter_invalid", "page");
    expectError(await api(p.baseUrl, "GET", "/api-keys?page=abc", { key: acme.live }), 400, "parameter_invalid", "page");
    expectError(await api(p.baseUrl, "GET", "/api-keys?page=1.5", { key: acme.live }), 400, "parameter_invalid", "page");
  });

  it("answers 404 for another organization's or environment's key, and for nonsense ids", async () => {
    const mine = (await create(acme.live, { name: "mine", scopes: ["events:read"] })).body.data.id;
    expectError(await api(p.baseUrl, "GET", `/api-keys/${mine}`, { key: globex.live }), 404, "resource_not_found");
    expectError(await api(p.baseUrl, "GET", `/api-keys/${mine}`, { key: acme.test }), 404, "resource_not_found");
    expectError(await api(p.baseUrl, "DELETE", `/api-keys/${mine}`, { key: globex.live }), 404, "resource_not_found");
    expectError(await api(p.baseUrl, "GET", "/api-keys/key_nothing", { key: acme.live }), 404, "resource_not_found");
    const still = await api(p.baseUrl, "GET", `/api-keys/${mine}`, { key: acme.live });
    expect(still.body.data.status).toBe("active");
  });

  it("records last_used_at after use", async () => {
    const made = (await create(acme.live, { name: "used", scopes: ["api-keys:read"] })).body.data;
    expect((await api(p.baseUrl, "GET", `/api-keys/${made.id}`, { key: made.key })).status).toBe(200);
    const gateway = p.broker.getLocalService("gateway") as unknown as { flushUsage(): Promise<void> };
    await gateway.flushUsage();
    const after = await api(p.baseUrl, "GET", `/api-keys/${made.id}`, { key: acme.live });
    expect(Date.parse(after.body.data.last_used_at)).toBeGreaterThanOrEqual(Date.parse(made.created_at));
  });
});

describe("DELETE /api-keys/{id}", () => {
  it("revokes at once: the next request with the key is a 401 api_key_revoked", async () => {
    const made = (await create(acme.live, { name: "doomed", scopes: ["api-keys:read"] })).body.data;
    expect((await api(p.baseUrl, "GET", "/api-keys", { key: made.key })).status).toBe(200);
    const res = await api(p.baseUrl, "DELETE", `/api-keys/${made.id}`, { key: acme.live });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: made.id, status: "revoked" });
    expect(res.body.data.revoked_at).toMatch(/Z$/);
    expectError(await api(p.baseUrl, "GET", "/api-keys", { key: made.key }), 401, "api_key_revoked");
    // DELETE is idempotent: the revoked key again, unchanged.
    const again = await api(p.baseUrl, "DELETE", `/api-keys/${made.id}`, { key: acme.live });
    expect(again.status).toBe(200);
    expect(again.body.data.revoked_at).toBe(res.body.data.revoked_at);
  });

  it("lets a key revoke itself, and then refuses it", async () => {
    const made = (await create(acme.live, { name: "self", scopes: ["api-keys:write"] })).body.data;
    expect((await api(p.baseUrl, "DELETE", `/api-keys/${made.id}`, { key: made.key })).status).toBe(401);
    expectError(
      await api(p.baseUrl, "POST", "/api-keys", { key: made.key, body: { name: "x", scopes: ["api-keys:write"] } }),
      401,
      "api_key_revoked",
    );
  });

  it("rotates without downtime, as the spec's four steps", async () => {
    const old = (await create(acme.live, { name: "svc v1", scopes: ["api-keys:read", "api-keys:write"] })).body.data;
    // 1. create a new key with the same scopes
    const fresh = (await create(old.key, { name: "svc v2", scopes: old.scopes })).body.data;
    expect(fresh.scopes).toEqual(old.scopes);
    // 2-3. both work while the configuration rolls out
    for (const key of [old.key, fresh.key]) expect((await api(p.baseUrl, "GET", "/api-keys", { key })).status).toBe(200);
    // 4. revoke the old once traffic moved
    expect((await api(p.baseUrl, "DELETE", `/api-keys/${old.id}`, { key: fresh.key })).status).toBe(200);
    expectError(await api(p.baseUrl, "GET", "/api-keys", { key: old.key }), 401, "api_key_revoked");
    expect((await api(p.baseUrl, "GET", "/api-keys", { key: fresh.key })).status).toBe(200);
  });
});

describe("expiry", () => {
  it("refuses an expired key with 401 api_key_expired and shows it as expired", async () => {
    const expires_at = new Date(Date.now() + 1500).toISOString();
    const made = (await create(acme.live, { name: "short", scopes: ["api-keys:read"], expires_at })).body.data;
    expect(made.expires_at).toBe(expires_at);
    expect((await api(p.baseUrl, "GET", "/api-keys", { key: made.key })).status).toBe(200);
    let refused: Awaited<ReturnType<typeof api>> | undefined;
    await waitFor(
      "the key refused",
      async () => (refused = await api(p.baseUrl, "GET", "/api-keys", { key: made.key })).status !== 200,
      5000,
    );
    // Refused from its expiry on, not before.
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expires_at));
    expectError(refused!, 401, "api_key_expired");
    const view = await api(p.baseUrl, "GET", `/api-keys/${made.id}`, { key: acme.live });
    expect(view.body.data.status).toBe("expired");
  });
});

describe("domain events", () => {
  it("stores api_key.created and api_key.revoked in the event log, with their data and never the secret", async () => {
    const made = (await create(acme.live, { name: "evented", scopes: ["events:read"] })).body.data;
    await api(p.baseUrl, "DELETE", `/api-keys/${made.id}`, { key: acme.live });
    const log = (type: string) => api(p.baseUrl, "GET", `/events?type=${type}&per_page=100`, { key: acme.live });
    const created = (await log("api_key.created")).body.data.find((e: any) => e.data.key_id === made.id);
    const revoked = (await log("api_key.revoked")).body.data.find((e: any) => e.data.key_id === made.id);
    expect(created).toMatchObject({
      type: "api_key.created",
      environment: "live",
      source: "keys",
      data: { key_id: made.id, name: "evented", environment: "live" },
    });
    expect(created.id).toMatch(/^evt_/);
    expect(revoked).toMatchObject({
      type: "api_key.revoked",
      environment: "live",
      source: "keys",
      data: { key_id: made.id, name: "evented" },
    });
    expect(revoked.data.revoked_at).toMatch(/Z$/);
    const all = await api(p.baseUrl, "GET", "/events?per_page=100", { key: acme.live });
    expect(JSON.stringify(all.body)).not.toContain(made.key.slice(9));
    // Another organization's log does not show them.
    const theirs = await api(p.baseUrl, "GET", "/events?per_page=100", { key: globex.live });
    expect(JSON.stringify(theirs.body)).not.toContain(made.id);
  });
});
