import { api, expectError, startPlatform, type Platform } from "../helpers/platform";

let p: Platform;
let acme: { org: { id: string; name: string }; live: string; test: string };
let globex: { org: { id: string }; live: string; test: string };

beforeAll(async () => {
  p = await startPlatform();
  acme = await p.createOrg("Acme");
  globex = await p.createOrg("Globex");
});
afterAll(() => p.stop());

describe("GET /orgs/{id}", () => {
  it("shows the caller's own organization", async () => {
    const res = await api(p.baseUrl, "GET", `/orgs/${acme.org.id}`, { key: acme.live });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: acme.org.id, name: "Acme", api_version: "2026-11-01" });
    expect(acme.org.id).toMatch(/^org_[0-9a-z]{26}$/);
  });

  it("answers 404 for another organization, from either environment", async () => {
    expectError(await api(p.baseUrl, "GET", `/orgs/${globex.org.id}`, { key: acme.live }), 404, "resource_not_found");
    expectError(
      await api(p.baseUrl, "PATCH", `/orgs/${globex.org.id}`, { key: acme.test, body: { name: "Mine now" } }),
      404,
      "resource_not_found",
    );
    const theirs = await api(p.baseUrl, "GET", `/orgs/${globex.org.id}`, { key: globex.live });
    expect(theirs.body.data.name).toBe("Globex");
  });

  it("needs org:admin", async () => {
    const limited = (await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "r", scopes: ["api-keys:read"] } })).body
      .data.key;
    const res = await api(p.baseUrl, "GET", `/orgs/${acme.org.id}`, { key: limited });
    expectError(res, 403, "insufficient_scope");
    expect(res.body.error.message).toContain("org:admin");
  });
});

describe("PATCH /orgs/{id}", () => {
  it("renames the organization and validates its fields", async () => {
    const res = await api(p.baseUrl, "PATCH", `/orgs/${acme.org.id}`, { key: acme.live, body: { name: "Acme Inc" } });
    expect(res.status).toBe(200);
    expect(res.body.data.name).toBe("Acme Inc");
    expectError(
      await api(p.baseUrl, "PATCH", `/orgs/${acme.org.id}`, { key: acme.live, body: { name: "" } }),
      400,
      "parameter_invalid",
      "name",
    );
    expectError(
      await api(p.baseUrl, "PATCH", `/orgs/${acme.org.id}`, { key: acme.live, body: { api_version: "1999-01-01" } }),
      400,
      "parameter_invalid",
      "api_version",
    );
    expectError(
      await api(p.baseUrl, "PATCH", `/orgs/${acme.org.id}`, { key: acme.live, body: { id: "org_other" } }),
      400,
      "parameter_unknown",
      "id",
    );
  });
});

describe("GET /orgs/{id}/environments", () => {
  it("lists live and test", async () => {
    const res = await api(p.baseUrl, "GET", `/orgs/${acme.org.id}/environments`, { key: acme.live });
    expect(res.status).toBe(200);
    expect(res.body.data.map((e: { id: string }) => e.id)).toEqual(["live", "test"]);
    expect(res.body.meta).toEqual({ total: 2, page: 1, per_page: 20 });
  });
});

describe("members", () => {
  it("adds, lists, changes and removes members, keeping one owner", async () => {
    const base = `/orgs/${acme.org.id}/members`;
    const owner = await api(p.baseUrl, "POST", base, { key: acme.live, body: { email: "Ada@Example.com", role: "owner" } });
    expect(owner.status).toBe(201);
    expect(owner.body.data).toMatchObject({ email: "ada@example.com", role: "owner" });
    expect(owner.body.data.id).toMatch(/^mem_/);
    const dev = await api(p.baseUrl, "POST", base, { key: acme.live, body: { email: "bob@example.com", role: "developer" } });
    expect(dev.status).toBe(201);

    expectError(
      await api(p.baseUrl, "POST", base, { key: acme.live, body: { email: "bob@example.com", role: "viewer" } }),
      409,
      "resource_exists",
      "email",
    );
    expectError(
      await api(p.baseUrl, "POST", base, { key: acme.live, body: { email: "not-an-email", role: "viewer" } }),
      400,
      "parameter_invalid",
      "email",
    );
    expectError(
      await api(p.baseUrl, "POST", base, { key: acme.live, body: { email: "c@example.com", role: "god" } }),
      400,
      "parameter_invalid",
      "role",
    );

    const list = await api(p.baseUrl, "GET", base, { key: acme.live });
    expect(list.body.meta.total).toBe(2);
    expect(list.body.data[0].email).toBe("bob@example.com");

    const promoted = await api(p.baseUrl, "PATCH", `${base}/${dev.body.data.id}`, { key: acme.live, body: { role: "admin" } });
    expect(promoted.body.data.role).toBe("admin");

    expectError(await api(p.baseUrl, "DELETE", `${base}/${owner.body.data.id}`, { key: acme.live }), 409, "invalid_state");
    expectError(
      await api(p.baseUrl, "PATCH", `${base}/${owner.body.data.id}`, { key: acme.live, body: { role: "viewer" } }),
      409,
      "invalid_state",
    );

    const removed = await api(p.baseUrl, "DELETE", `${base}/${dev.body.data.id}`, { key: acme.live });
    expect(removed.status).toBe(200);
    expect(removed.body.data.id).toBe(dev.body.data.id);
    expectError(await api(p.baseUrl, "DELETE", `${base}/${dev.body.data.id}`, { key: acme.live }), 404, "resource_not_found");

    // Another organization cannot see or touch them.
    expectError(await api(p.baseUrl, "GET", base, { key: globex.live }), 404, "resource_not_found");
    expectError(
      await api(p.baseUrl, "PATCH", `/orgs/${globex.org.id}/members/${owner.body.data.id}`, { key: globex.live, body: { role: "viewer" } }),
      404,
      "resource_not_found",
    );
  });
});

describe("GET /me", () => {
  it("tells any key, whatever its scopes, whose it is and what it may do", async () => {
    const created = (await api(p.baseUrl, "POST", "/api-keys", { key: acme.test, body: { name: "Events only", scopes: ["events:read"] } }))
      .body.data;
    const res = await api(p.baseUrl, "GET", "/me", { key: created.key });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      object: "identity",
      org: { id: acme.org.id, name: expect.any(String) },
      environment: "test",
      api_key: {
        id: created.id,
        name: "Events only",
        prefix: created.prefix,
        last4: created.last4,
        scopes: ["events:read"],
        expires_at: null,
      },
    });
    expect(JSON.stringify(res.body)).not.toContain(created.key);

    const theirs = await api(p.baseUrl, "GET", "/me", { key: globex.live });
    expect(theirs.body.data).toMatchObject({ org: { id: globex.org.id, name: "Globex" }, environment: "live" });
  });

  it("refuses a missing, unknown or revoked key", async () => {
    expectError(await api(p.baseUrl, "GET", "/me"), 401, "missing_api_key");
    expectError(await api(p.baseUrl, "GET", "/me", { key: "svc_live_nope" }), 401, "invalid_api_key");
    const created = (await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "Gone", scopes: ["events:read"] } })).body
      .data;
    await api(p.baseUrl, "DELETE", `/api-keys/${created.id}`, { key: acme.live });
    expectError(await api(p.baseUrl, "GET", "/me", { key: created.key }), 401, "api_key_revoked");
  });

  it("takes no parameters", async () => {
    expectError(await api(p.baseUrl, "GET", "/me?expand=org", { key: acme.live }), 400, "parameter_unknown", "expand");
  });
});
