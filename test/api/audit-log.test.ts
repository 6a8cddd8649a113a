import { randomBytes } from "node:crypto";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform, type ApiResponse } from "../helpers/platform";

/**
 * GET /audit-log through HTTP: every kind of successful mutation is recorded once, before its answer,
 * with its key, request id and address; the data plane and refused requests are not; one
 * organization's log is its own; org:admin only; filters, paging, retention; no secret in an entry.
 */
const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  SECRETS_KEYS: `k1:${randomBytes(32).toString("base64")}`,
  RATE_LIMIT_MAX: "1000000",
});

let seq = 0;
/** A request with its own X-Request-Id (the gateway keeps a well-formed one), answered with it. */
async function call(method: string, path: string, body?: unknown, key = suite.acme.live): Promise<ApiResponse & { requestId: string }> {
  seq += 1;
  const requestId = `audit-test-${process.pid}-${seq}`;
  const res = await api(suite.p.baseUrl, method, path, { key, body, headers: { "x-request-id": requestId } });
  expect(res.headers["request-id"]).toBe(requestId);
  return { ...res, requestId };
}

const auditLog = async (query = "", key = suite.acme.live) => api(suite.p.baseUrl, "GET", `/audit-log${query}`, { key });

/** Every entry of Acme's log (both environments), newest first. */
async function allEntries(): Promise<any[]> {
  const res = await auditLog("?per_page=100");
  expect(res.status).toBe(200);
  return res.body.data;
}

const steps = [{ id: "ok", type: "approval", message: "go?" }];

describe("GET /audit-log", () => {
  /** Each mutation made below, with what its entry must say; and everything secret they answered. */
  type By = "admin" | "writer" | "test admin" | "self";
  const made: { res: { requestId: string; status: number }; action: string; method: string; route: string; resource: string; by: By }[] =
    [];
  const secrets: string[] = [];
  let adminKeyId = "";
  let writer: { id: string; key: string };
  let selfKey: { id: string; key: string };

  beforeAll(async () => {
    const org = suite.acme.org.id;
    const me = await call("GET", "/me");
    adminKeyId = me.body.data.api_key.id;
    const did = (
      res: { requestId: string; status: number },
      action: string,
      method: string,
      route: string,
      resource: string,
      by: By = route.startsWith("/webhooks") ? "writer" : "admin",
    ) => made.push({ res, action, method, route, resource, by });

    const key = await call("POST", "/api-keys", {
      name: "writer",
      scopes: ["webhooks:write", "webhooks:read", "workflows:write", "events:write"],
    });
    expect(key.status).toBe(201);
    writer = key.body.data;
    secrets.push(writer.key);
    did(key, "api_key.created", "POST", "/api-keys", writer.id);

    const wh = await call("POST", "/webhooks", { url: "http://127.0.0.1:9/hook", events: ["*"] }, writer.key);
    expect(wh.status).toBe(201);
    secrets.push(wh.body.data.secret);
    did(wh, "webhook.created", "POST", "/webhooks", wh.body.data.id);
    const whId = wh.body.data.id;
    did(
      await call("PATCH", `/webhooks/${whId}`, { description: "orders" }, writer.key),
      "webhook.updated",
      "PATCH",
      "/webhooks/{id}",
      whId,
    );
    const rotated = await call("POST", `/webhooks/${whId}/rotate-secret`, undefined, writer.key);
    secrets.push(rotated.body.data.secret);
    did(rotated, "webhook.secret_rotated", "POST", "/webhooks/{id}/rotate-secret", whId);
    did(await call("DELETE", `/webhooks/${whId}`, undefined, writer.key), "webhook.deleted", "DELETE", "/webhooks/{id}", whId);

    const wf = await call("POST", "/workflows", { name: "audited", trigger: { type: "manual" }, steps });
    expect(wf.status).toBe(201);
    secrets.push(wf.body.data.signing_secret);
    const wfId = wf.body.data.id;
    did(wf, "workflow.created", "POST", "/workflows", wfId);
    did(await call("PATCH", `/workflows/${wfId}`, { name: "audited too" }), "workflow.updated", "PATCH", "/workflows/{id}", wfId);
    const wfRotated = await call("POST", `/workflows/${wfId}/rotate-secret`);
    secrets.push(wfRotated.body.data.signing_secret);
    did(wfRotated, "workflow.secret_rotated", "POST", "/workflows/{id}/rotate-secret", wfId);
    const run = await call("POST", `/workflows/${wfId}/runs`, { input: {} });
    expect(run.status).toBe(201);
    did(run, "", "POST", "/workflows/{id}/runs", ""); // the data plane: no entry
    did(
      await call("POST", `/workflows/${wfId}/runs/${run.body.data.id}/cancel`),
      "run.cancelled",
      "POST",
      "/workflows/{id}/runs/{run_id}/cancel",
      run.body.data.id,
    );
    const runRoute = "/workflows/{id}/runs/{run_id}";
    const rerun = await call("POST", `/workflows/${wfId}/runs/${run.body.data.id}/rerun`);
    did(rerun, "run.rerun", "POST", `${runRoute}/rerun`, run.body.data.id);
    await waitFor("the rerun to wait for its approval", async () => {
      return (await call("GET", `/workflows/${wfId}/runs/${rerun.body.data.id}`)).body.data.status === "waiting";
    });
    did(
      await call("POST", `/workflows/${wfId}/runs/${rerun.body.data.id}/approve`, { comment: "ok" }),
      "run.approved",
      "POST",
      `${runRoute}/approve`,
      rerun.body.data.id,
    );
    did(await call("DELETE", `/workflows/${wfId}`), "workflow.deleted", "DELETE", "/workflows/{id}", wfId);

    const value = `s3cr3t-${randomBytes(8).toString("hex")}`;
    secrets.push(value);
    did(await call("POST", "/secrets", { name: "AUDIT_TOKEN", value }), "secret.stored", "POST", "/secrets", "AUDIT_TOKEN");
    did(await call("DELETE", "/secrets/AUDIT_TOKEN"), "secret.deleted", "DELETE", "/secrets/{name}", "AUDIT_TOKEN");

    const member = await call("POST", `/orgs/${org}/members`, { email: "audit@example.com", role: "viewer" });
    did(member, "member.added", "POST", "/orgs/{id}/members", member.body.data.id);
    const memberId = member.body.data.id;
    did(
      await call("PATCH", `/orgs/${org}/members/${memberId}`, { role: "developer" }),
      "member.role_changed",
      "PATCH",
      "/orgs/{id}/members/{member_id}",
      memberId,
    );
    did(await call("DELETE", `/orgs/${org}/members/${memberId}`), "member.removed", "DELETE", "/orgs/{id}/members/{member_id}", memberId);
    did(await call("PATCH", `/orgs/${org}`, { name: "Acme" }), "org.updated", "PATCH", "/orgs/{id}", org);

    const emitted = await call("POST", "/events", { type: "order.created", data: {} }, writer.key);
    expect(emitted.status).toBe(201);
    did(emitted, "", "POST", "/events", "");
    // A test-environment key's change is in the same organization's log, marked `test`.
    const testKey = await call("POST", "/api-keys", { name: "tester", scopes: ["events:read"] }, suite.acme.test);
    secrets.push(testKey.body.data.key);
    did(testKey, "api_key.created", "POST", "/api-keys", testKey.body.data.id, "test admin");
    did(await call("DELETE", `/api-keys/${writer.id}`), "api_key.revoked", "DELETE", "/api-keys/{id}", writer.id);
    for (const { res } of made) expect(res.status).toBeLessThan(300);
    // A key that revokes itself is answered 401 (it is revoked by then), and its revocation is recorded so.
    const selfMade = await call("POST", "/api-keys", { name: "self", scopes: ["api-keys:write"] });
    const self = selfMade.body.data;
    did(selfMade, "api_key.created", "POST", "/api-keys", self.id);
    const selfRevoked = await call("DELETE", `/api-keys/${self.id}`, undefined, self.key);
    expect(selfRevoked.status).toBe(401);
    did(selfRevoked, "api_key.revoked", "DELETE", "/api-keys/{id}", self.id, "self");
    selfKey = self;
  });

  it("records each successful mutation once, as it was asked: key, action, route, resource, request id, address, status", async () => {
    const entries = await allEntries();
    const testAdmin = (await api(suite.p.baseUrl, "GET", "/me", { key: suite.acme.test })).body.data.api_key.id;
    const actors = {
      admin: { key_id: adminKeyId, key_name: "Default live key" },
      writer: { key_id: writer.id, key_name: "writer" },
      "test admin": { key_id: testAdmin, key_name: "Default test key" },
      self: { key_id: selfKey.id, key_name: "self" },
    };
    for (const { res, action, method, route, resource, by } of made) {
      const mine = entries.filter((e) => e.request_id === res.requestId);
      if (action === "") {
        expect({ route, entries: mine }).toEqual({ route, entries: [] });
        continue;
      }
      expect(mine).toHaveLength(1);
      expect(mine[0]).toEqual({
        object: "audit_entry",
        id: expect.stringMatching(/^aud_/),
        environment: by === "test admin" ? "test" : "live",
        actor: actors[by],
        action,
        method,
        route,
        resource: { type: action.split(".")[0], id: resource },
        request_id: res.requestId,
        client_address: expect.stringMatching(/127\.0\.0\.1$/),
        status: res.status,
        created_at: expect.any(String),
      });
    }
  });

  it("keeps no secret: no key, webhook secret, signing secret or secret value is in any entry", async () => {
    const text = JSON.stringify(await allEntries());
    secrets.push(selfKey.key);
    expect(secrets.length).toBe(8);
    for (const secret of secrets) expect(text.includes(secret)).toBe(false);
  });

  it("records no refused mutation", async () => {
    const refused = [
      await call("DELETE", "/webhooks/wh_nope"),
      await call("POST", "/webhooks", { url: "not a url", events: ["*"] }),
      await call("PATCH", `/orgs/${suite.acme.org.id}/members/mem_nope`, { role: "owner" }),
    ];
    for (const res of refused) expect(res.status).toBeGreaterThanOrEqual(400);
    const ids = new Set(refused.map((r) => r.requestId));
    expect((await allEntries()).filter((e) => ids.has(e.request_id))).toEqual([]);
  });

  it("is the organization's own: another organization sees none of it", async () => {
    const theirs = await auditLog("?per_page=100", suite.globex.live);
    expect(theirs.status).toBe(200);
    expect(theirs.body.data).toEqual([]);
    expect(theirs.body.meta).toMatchObject({ total: 0 });
  });

  it("needs org:admin", async () => {
    const reader = await call("POST", "/api-keys", { name: "reader", scopes: ["events:read", "webhooks:read", "workflows:read"] });
    expectError(await auditLog("", reader.body.data.key), 403, "insufficient_scope");
  });

  it("filters by action, resource, key, environment and time", async () => {
    const entries = await allEntries();
    const actions = async (query: string) => ((await auditLog(query)).body.data as any[]).map((e) => e.action);
    expect(await actions("?action=webhook.updated")).toEqual(["webhook.updated"]);
    const wh = made.find((m) => m.action === "webhook.created")!.resource;
    expect(await actions(`?resource_id=${wh}`)).toEqual([
      "webhook.deleted",
      "webhook.secret_rotated",
      "webhook.updated",
      "webhook.created",
    ]);
    expect(await actions(`?key_id=${writer.id}`)).toEqual([
      "webhook.deleted",
      "webhook.secret_rotated",
      "webhook.updated",
      "webhook.created",
    ]);
    expect(await actions("?environment=test")).toEqual(["api_key.created"]);
    // One indexed filter at a time (each has its index; two would scan one's for the other).
    expectError(await auditLog(`?key_id=${writer.id}&action=webhook.created`), 400, "parameter_invalid", "key_id");
    const since = made.find((m) => m.action === "webhook.created")!;
    const sinceAt = (await allEntries()).find((e) => e.request_id === since.res.requestId).created_at;
    expect(await actions(`?key_id=${writer.id}&created_after=${sinceAt}`)).toEqual(await actions(`?key_id=${writer.id}`));

    const oldest = entries[entries.length - 1];
    const after = new Date(Date.parse(oldest.created_at) + 1).toISOString();
    const newer = ((await auditLog(`?created_after=${after}&per_page=100`)).body.data as any[]).map((e) => e.id);
    expect(newer).toEqual(entries.filter((e) => Date.parse(e.created_at) >= Date.parse(after)).map((e) => e.id));
    const before = ((await auditLog(`?created_before=${after}&per_page=100`)).body.data as any[]).map((e) => e.id);
    expect(before).toEqual(entries.filter((e) => Date.parse(e.created_at) < Date.parse(after)).map((e) => e.id));
    expect(before).toContain(oldest.id);
    expectError(await auditLog("?created_after=yesterday"), 400, "parameter_invalid", "created_after");
    expectError(await auditLog("?actor=me"), 400, "parameter_unknown", "actor");
  });

  it("pages newest first by number and by cursor, as every list does", async () => {
    const entries = await allEntries();
    const ids = entries.map((e) => e.id);
    expect([...ids].sort().reverse()).toEqual(ids);
    const page2 = await auditLog("?per_page=3&page=2");
    expect(page2.body.meta).toEqual({ total: entries.length, page: 2, per_page: 3 });
    expect(page2.body.data.map((e: any) => e.id)).toEqual(ids.slice(3, 6));
    const next = await auditLog(`?limit=4&starting_after=${ids[1]}`);
    expect(next.body.meta).toEqual({ total: entries.length, limit: 4, has_more: true });
    expect(next.body.data.map((e: any) => e.id)).toEqual(ids.slice(2, 6));
  });

  it("stores the entries that arrive while a write is under way together, in the next write (group commit)", async () => {
    const wf = await call("POST", "/workflows", { name: "busy", trigger: { type: "manual" }, steps });
    const broker = suite.p.broker;
    const gateway = broker.getLocalService("gateway") as unknown as { auditLog: { waiting: number } };
    const original = broker.call.bind(broker);
    const writes: number[] = [];
    let first: Promise<void> | undefined;
    let release: () => void = () => undefined;
    // The first write is held (a slow store, a NATS round trip) until the 39 other mutations' entries wait behind it.
    const spy = jest.spyOn(broker, "call").mockImplementation(((action: string, params: { entries?: unknown[] }, opts?: unknown) => {
      if (action !== "orgs.recordAudit") return original(action, params, opts as never);
      writes.push(params.entries?.length ?? 0);
      first ??= new Promise<void>((ok) => (release = ok));
      return (writes.length === 1 ? first : Promise.resolve()).then(() => original(action, params, opts as never));
    }) as typeof broker.call);
    try {
      const answers = Promise.all(
        Array.from({ length: 40 }, (_, i) => call("PATCH", `/workflows/${wf.body.data.id}`, { description: `take ${i}` })),
      );
      await waitFor("39 entries waiting behind the first write", async () => gateway.auditLog.waiting === 39);
      release();
      const done = await answers;
      expect(done.map((a) => a.status)).toEqual(done.map(() => 200));
      expect(writes).toEqual([1, 39]);
      const ids = new Set(done.map((a) => a.requestId));
      const listed = (await auditLog(`?resource_id=${wf.body.data.id}&per_page=100`)).body.data as any[];
      expect(listed.filter((e) => ids.has(e.request_id))).toHaveLength(40);
    } finally {
      spy.mockRestore();
    }
  });

  it("is pruned after AUDIT_RETENTION_DAYS", async () => {
    const before = (await allEntries()).length;
    expect(await suite.p.broker.call("orgs.prune", { now: Date.now() + 364 * 86_400_000 })).toBe(0);
    expect((await allEntries()).length).toBe(before);
    const removed = await suite.p.broker.call<number, { now: number }>("orgs.prune", { now: Date.now() + 366 * 86_400_000 });
    expect(removed).toBeGreaterThanOrEqual(before);
    expect(await allEntries()).toEqual([]);
  });

  it("answers 500 when a change's entry cannot be stored: the change stands, its answer never says it succeeded", async () => {
    const orgs = suite.p.broker.getLocalService("orgs")!;
    await suite.p.broker.destroyService(orgs);
    const gateway = suite.p.broker.getLocalService("gateway")!;
    const logged = jest.spyOn(gateway.logger, "error");
    const res = await call("POST", "/webhooks", { url: "http://127.0.0.1:9/unaudited", events: ["*"] });
    // Never silent: an error line with the request id and the whole entry (nothing secret in it).
    expect(logged).toHaveBeenCalledWith(
      expect.objectContaining({
        request_id: res.requestId,
        audit_entry: expect.objectContaining({ action: "webhook.created", request_id: res.requestId, status: 201 }),
      }),
      "Audit log entry not stored; the change was applied",
    );
    logged.mockRestore();
    expect({ status: res.status, code: res.body.error.code, request_id: res.body.error.request_id }).toEqual({
      status: 500,
      code: "internal_error",
      request_id: res.requestId,
    });
    expect(res.body.error.message).toMatch(/applied, but its audit log entry could not be stored/);
    const hooks = (await call("GET", "/webhooks?per_page=100")).body.data as any[];
    expect(hooks.filter((h) => h.url === "http://127.0.0.1:9/unaudited")).toHaveLength(1);
  });
});
