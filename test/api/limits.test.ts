import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually, eventuallyValue } from "../../tools/eventually";
import { waitFor } from "../../tools/procs";
import { manualClock } from "../helpers/clock";
import { api, expectError, startPlatform, usePlatform, type Platform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * Issue 16's limits, tried the way an attacker would: a chain of events that multiplies runs,
 * unbounded webhooks, keys, workflows and run starts, a secret rotated again and again, keys that
 * reach above themselves, PATCH with null, a malformed email, and a private target the dispatcher
 * must refuse once the setting no longer allows it.
 */
// The run-start budget counts per clock minute: the suite's clock stands 10 s into a minute and
// moves only when a test moves it.
const clock = manualClock(Date.UTC(2026, 10, 26, 12, 0, 10));
const suite = usePlatform(
  {
    WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
    RUN_STARTS_PER_MINUTE: "5",
    WEBHOOK_RETRY_DELAYS_MS: "50,50,50,50",
    RATE_LIMIT_MAX: "100000",
  },
  { clock },
);

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(() => rx.close());

const call = (method: string, path: string, key: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key, body });

describe("a chain of event-started runs", () => {
  // Event-started runs count against RUN_STARTS_PER_MINUTE too: this chain's 100 runs need more than this suite's 5.
  let chains: Platform;
  beforeAll(async () => {
    chains = await startPlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RUN_STARTS_PER_MINUTE: "1000", RATE_LIMIT_MAX: "100000" });
  });
  afterAll(() => chains?.stop());
  const call = (method: string, path: string, key: string, body?: unknown) => api(chains.baseUrl, method, path, { key, body });

  it("starts at most 100 runs from one event, however the workflows multiply it, and says so once", async () => {
    const { live } = await chains.createOrg("Chains");
    const twice = (type: string) => [
      { type: "emit", event_type: type },
      { type: "emit", event_type: type },
    ];
    const a = (
      await call("POST", "/workflows", live, { name: "A", trigger: { type: "event", event_type: "fan.a" }, steps: twice("fan.b") })
    ).body.data;
    const b = (
      await call("POST", "/workflows", live, { name: "B", trigger: { type: "event", event_type: "fan.b" }, steps: twice("fan.a") })
    ).body.data;
    const root = (await call("POST", "/events", live, { type: "fan.a" })).body.data;
    const total = async () =>
      (await call("GET", `/workflows/${a.id}/runs`, live)).body.meta.total +
      (await call("GET", `/workflows/${b.id}/runs`, live)).body.meta.total;
    // Without a budget this one event sets off 1 + 2 + 4 + … + 512 = 1023 runs (depth 10).
    await eventually("the chain to reach its budget (or pass it)", async () => {
      const seen = await total();
      return seen > 100 || (seen === 100 && (await call("GET", "/events?type=workflow.chain_limited", live)).body.meta.total === 1);
    });
    // Then nothing more starts: once every run has ended, an event stored after the chain's last
    // ones starts its own run only after the trigger went through those.
    const runsOf = async (wf: string) => (await call("GET", `/workflows/${wf}/runs?per_page=100`, live)).body.data;
    await waitFor("every run of the chain ended", async () =>
      [...(await runsOf(a.id)), ...(await runsOf(b.id))].every((r: any) => ["succeeded", "failed", "cancelled"].includes(r.status)),
    );
    const witness = (
      await call("POST", "/workflows", live, {
        name: "W",
        trigger: { type: "event", event_type: "fan.witness" },
        steps: [{ type: "delay", duration_ms: 1 }],
      })
    ).body.data;
    await call("POST", "/events", live, { type: "fan.witness" });
    await waitFor("the witness run", async () => (await runsOf(witness.id)).length === 1);
    expect(await total()).toBe(100);
    const limited = (await call("GET", "/events?type=workflow.chain_limited", live)).body;
    expect(limited.meta.total).toBe(1);
    expect(limited.data[0]).toMatchObject({ source: "workflows", data: { root_event_id: root.id, limit: 100 } });
    expect([a.id, b.id]).toContain(limited.data[0].data.workflow_id);
  }, 40_000);
});

describe("quotas per organization", () => {
  it("refuses the 51st webhook of an environment with 400 quota_exceeded naming the quota and the limit", async () => {
    const { live, test } = await suite.p.createOrg("Hooks");
    for (let i = 0; i < 50; i += 1) {
      expect((await call("POST", "/webhooks", live, { url: rx.url(`/q${i}`), events: ["*"] })).status).toBe(201);
    }
    const refused = await call("POST", "/webhooks", live, { url: rx.url("/q50"), events: ["*"] });
    expectError(refused, 400, "quota_exceeded");
    expect(refused.body.error.message).toContain("webhooks_per_environment");
    expect(refused.body.error.message).toContain("50");
    expect((await call("GET", "/webhooks", live)).body.meta.total).toBe(50);
    // Per environment: the test environment has its own 50.
    expect((await call("POST", "/webhooks", test, { url: rx.url("/t"), events: ["*"] })).status).toBe(201);
    // Deleting one makes room.
    const first = (await call("GET", "/webhooks?per_page=1", live)).body.data[0];
    await call("DELETE", `/webhooks/${first.id}`, live);
    expect((await call("POST", "/webhooks", live, { url: rx.url("/q51"), events: ["*"] })).status).toBe(201);
  }, 30_000);

  it("refuses the 101st active API key of an environment; a revoked key makes room", async () => {
    const { live } = await suite.p.createOrg("Keys");
    // The bootstrap's live admin key is the first of the 100.
    const made: string[] = [];
    for (let i = 0; i < 99; i += 1) {
      const res = await call("POST", "/api-keys", live, { name: `k${i}`, scopes: ["events:read"] });
      expect(res.status).toBe(201);
      made.push(res.body.data.id);
    }
    const refused = await call("POST", "/api-keys", live, { name: "one too many", scopes: ["events:read"] });
    expectError(refused, 400, "quota_exceeded");
    expect(refused.body.error.message).toContain("active_api_keys_per_environment");
    expect(refused.body.error.message).toContain("100");
    await call("DELETE", `/api-keys/${made[0]}`, live);
    expect((await call("POST", "/api-keys", live, { name: "room again", scopes: ["events:read"] })).status).toBe(201);
  }, 30_000);

  it("refuses the 201st workflow of an environment", async () => {
    const { live } = await suite.p.createOrg("Workflows");
    const body = { name: "w", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] };
    for (let i = 0; i < 200; i += 1) expect((await call("POST", "/workflows", live, body)).status).toBe(201);
    const refused = await call("POST", "/workflows", live, body);
    expectError(refused, 400, "quota_exceeded");
    expect(refused.body.error.message).toContain("workflows_per_environment");
    expect(refused.body.error.message).toContain("200");
  }, 30_000);

  it("answers 429 with Retry-After past RUN_STARTS_PER_MINUTE runs started in a minute", async () => {
    const { live, test } = await suite.p.createOrg("Runs");
    const wf = (
      await call("POST", "/workflows", live, { name: "r", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] })
    ).body.data;
    const wfTest = (
      await call("POST", "/workflows", test, { name: "r", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] })
    ).body.data;
    for (let i = 0; i < 5; i += 1) expect((await call("POST", `/workflows/${wf.id}/runs`, live, {})).status).toBe(201);
    const refused = await call("POST", `/workflows/${wf.id}/runs`, live, {});
    expectError(refused, 429, "rate_limited");
    expect(refused.body.error.message).toContain("runs_started_per_minute");
    // The minute began 10 s before the suite's clock: the budget comes back in 50 s.
    expect(refused.headers["retry-after"]).toBe("50");
    expect((await call("GET", `/workflows/${wf.id}/runs`, live)).body.meta.total).toBe(5);
    // Per environment.
    expect((await call("POST", `/workflows/${wfTest.id}/runs`, test, {})).status).toBe(201);
    // The next minute has a budget of its own.
    clock.advance(50_000);
    expect((await call("POST", `/workflows/${wf.id}/runs`, live, {})).status).toBe(201);
  });
});

describe("webhook secret rotation", () => {
  it("keeps at most two signing secrets alive: rotating again retires the older overlap", async () => {
    const { live } = await suite.p.createOrg("Rotations");
    const created = (await call("POST", "/webhooks", live, { url: rx.url("/rot"), events: ["rot.test"] })).body.data;
    const secrets: string[] = [created.secret];
    for (let i = 0; i < 6; i += 1) secrets.push((await call("POST", `/webhooks/${created.id}/rotate-secret`, live)).body.data.secret);
    rx.setSecret("/rot", secrets.slice(-2));
    await call("POST", "/events", live, { type: "rot.test" });
    await rx.waitFor(() => rx.byPath("/rot").length >= 1, 5000);
    const [got] = rx.byPath("/rot");
    expect(got.verified).toBe(true);
    // The new secret and the one rotated out last: not all seven.
    expect(got.headers["webhook-signature"].split(" ")).toHaveLength(2);
  });
});

describe("keys that reach above themselves", () => {
  const future = (ms: number) => new Date(Date.now() + ms).toISOString();

  it("a key with api-keys:write cannot revoke an org:admin key or one with scopes it lacks", async () => {
    const { live } = await suite.p.createOrg("Revokers");
    const writer = (await call("POST", "/api-keys", live, { name: "writer", scopes: ["api-keys:write", "api-keys:read"] })).body.data;
    const admin = (await call("POST", "/api-keys", live, { name: "admin", scopes: ["org:admin"] })).body.data;
    const hooks = (await call("POST", "/api-keys", live, { name: "hooks", scopes: ["webhooks:write"] })).body.data;
    const reader = (await call("POST", "/api-keys", live, { name: "reader", scopes: ["api-keys:read"] })).body.data;

    const refused = await call("DELETE", `/api-keys/${admin.id}`, writer.key);
    expectError(refused, 403, "insufficient_scope", "id");
    expect(refused.body.error.message).toContain("org:admin");
    expectError(await call("DELETE", `/api-keys/${hooks.id}`, writer.key), 403, "insufficient_scope", "id");
    expect((await call("GET", "/me", admin.key)).status).toBe(200);
    // Within what it holds: allowed.
    expect((await call("DELETE", `/api-keys/${reader.id}`, writer.key)).body.data.status).toBe("revoked");
    // org:admin revokes anything.
    expect((await call("DELETE", `/api-keys/${hooks.id}`, live)).body.data.status).toBe("revoked");
  });

  it("a key that expires cannot mint a key that outlives it", async () => {
    const { live } = await suite.p.createOrg("Expiring");
    const ends = future(3_600_000);
    const short = (await call("POST", "/api-keys", live, { name: "short", scopes: ["api-keys:write", "events:read"], expires_at: ends }))
      .body.data;
    expectError(
      await call("POST", "/api-keys", short.key, { name: "forever", scopes: ["events:read"] }),
      400,
      "parameter_invalid",
      "expires_at",
    );
    expectError(
      await call("POST", "/api-keys", short.key, { name: "later", scopes: ["events:read"], expires_at: future(7_200_000) }),
      400,
      "parameter_invalid",
      "expires_at",
    );
    const within = await call("POST", "/api-keys", short.key, { name: "within", scopes: ["events:read"], expires_at: future(1_800_000) });
    expect(within.status).toBe(201);
    expect((await call("POST", "/api-keys", short.key, { name: "same", scopes: ["events:read"], expires_at: ends })).status).toBe(201);
  });

  it("a test (sandbox) key never mints a live key, even with org:admin; a live admin key may mint test keys", async () => {
    const { live, test } = await suite.p.createOrg("Sandbox");
    const refused = await call("POST", "/api-keys", test, { name: "escape", scopes: ["org:admin"], environment: "live" });
    expectError(refused, 403, "insufficient_scope", "environment");
    expectError(
      await call("POST", "/api-keys", test, { name: "escape", scopes: ["events:read"], environment: "live" }),
      403,
      "insufficient_scope",
      "environment",
    );
    expect((await call("GET", "/api-keys", live)).body.data.map((k: { name: string }) => k.name)).not.toContain("escape");
    const sandbox = await call("POST", "/api-keys", live, { name: "sandbox", scopes: ["events:read"], environment: "test" });
    expect(sandbox.status).toBe(201);
    expect(sandbox.body.data.key).toMatch(/^svc_test_/);
  });
});

describe("PATCH with null into fields that must keep a value", () => {
  it("refuses a workflow's status, name, trigger or steps set to null, and stores nothing", async () => {
    const { live } = await suite.p.createOrg("Nulls");
    // The create answer alone shows the workflow's signing secret; reads never do.
    const { signing_secret: _secret, ...wf } = (
      await call("POST", "/workflows", live, { name: "n", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] })
    ).body.data;
    for (const field of ["status", "name", "trigger", "steps"]) {
      expectError(await call("PATCH", `/workflows/${wf.id}`, live, { [field]: null }), 400, "parameter_invalid", field);
    }
    expect((await call("GET", `/workflows/${wf.id}`, live)).body.data).toEqual(wf);
    // description may be null.
    expect((await call("PATCH", `/workflows/${wf.id}`, live, { description: null })).status).toBe(200);
  });

  it("refuses an organization's api_version or name set to null", async () => {
    const { org, live } = await suite.p.createOrg("NullOrg");
    const before = (await call("GET", `/orgs/${org.id}`, live)).body.data;
    expectError(await call("PATCH", `/orgs/${org.id}`, live, { api_version: null }), 400, "parameter_invalid", "api_version");
    expectError(await call("PATCH", `/orgs/${org.id}`, live, { name: null }), 400, "parameter_invalid", "name");
    expect((await call("GET", `/orgs/${org.id}`, live)).body.data).toEqual(before);
  });

  it("refuses a webhook's events, url or status set to null", async () => {
    const { live } = await suite.p.createOrg("NullHooks");
    const wh = (await call("POST", "/webhooks", live, { url: rx.url("/null"), events: ["a.b"] })).body.data;
    for (const field of ["events", "url", "status"]) {
      expectError(await call("PATCH", `/webhooks/${wh.id}`, live, { [field]: null }), 400, "parameter_invalid", field);
    }
    expect((await call("GET", `/webhooks/${wh.id}`, live)).body.data).toMatchObject({ events: ["a.b"], status: "enabled" });
  });
});

describe("members", () => {
  it.each(["a@b..com", "a..b@example.com", ".a@example.com", "a@.example.com", "a@example"])("refuses the email %s", async (email) => {
    const { org, live } = await suite.p.createOrg("Emails");
    expectError(await call("POST", `/orgs/${org.id}/members`, live, { email, role: "viewer" }), 400, "parameter_invalid", "email");
  });
});

describe("the SSRF guard", () => {
  let dir: string;
  let p: Platform;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "wfp-limits-"));
  });
  afterAll(async () => {
    await p?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the dispatcher refuses an IP-literal private target stored while private targets were allowed, once they are not", async () => {
    const fast = { DATA_DIR: dir, WEBHOOK_TIMEOUT_MS: "500", WEBHOOK_RETRY_DELAYS_MS: "20,20,20,20" };
    p = await startPlatform({ ...fast, WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
    const { live } = await p.createOrg("Literal");
    const wh = (await api(p.baseUrl, "POST", "/webhooks", { key: live, body: { url: rx.url("/literal"), events: ["lit.test"] } })).body
      .data;
    expect(wh.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
    await p.stop();

    p = await startPlatform(fast);
    await api(p.baseUrl, "POST", "/events", { key: live, body: { type: "lit.test" } });
    const delivery = await eventuallyValue(
      "the delivery to fail",
      async () => (await api(p.baseUrl, "GET", `/webhooks/${wh.id}/deliveries`, { key: live })).body.data[0],
      (d) => d?.status === "failed",
      8000,
    );
    expect(delivery).toMatchObject({ status: "failed" });
    expect(delivery.attempts[0].error).toBe("target address not allowed: the host is a private address");
    expect(rx.byPath("/literal")).toHaveLength(0);
  }, 20_000);

  it("refuses a URL to a private address without naming the address", async () => {
    const { live } = await p.createOrg("Names");
    for (const url of [
      "https://10.1.2.3/x",
      "https://[::ffff:0:7f00:1]/x",
      "https://[::127.0.0.1]/x",
      "https://[2002:a00:1::1]/x",
      "https://[fec0::1]/x",
      "https://[64:ff9b:1::a00:1]/x",
    ]) {
      const res = await api(p.baseUrl, "POST", "/webhooks", { key: live, body: { url, events: ["*"] } });
      expectError(res, 400, "url_not_allowed", "url");
      expect(res.body.error.message).toBe(
        "the host resolves to a private address; for local use only, start the server with WEBHOOK_ALLOW_PRIVATE_TARGETS=true to allow it",
      );
    }
  });
});
