import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { Client } from "undici";
import { waitFor } from "../../tools/procs";
import { loadSettings } from "../../shared/config";
import { createBroker } from "../../app/broker";
import { ApiError } from "../../shared/errors";
import { openStore } from "../../shared/storage";
import { DATABASE_FILE } from "../../shared/storage/sqlite";
import type { Store } from "../../shared/storage/types";
import { api, expectError, startPlatform, usePlatform, type Platform } from "../helpers/platform";

/**
 * The gateway's defences (issue 16): idempotent replays bound to the calling key and never holding a
 * secret, authentication before the body, time-outs, per-organization and per-address budgets,
 * plain decimal page numbers, a breaker that does not outlive a store outage, and a stop that lets
 * no kept-alive client hold the node.
 */

const hostPort = (baseUrl: string) => {
  const u = new URL(baseUrl);
  return { host: u.hostname, port: Number(u.port) };
};

/** A raw socket to the gateway: what it received, and when it closed. */
function rawSocket(baseUrl: string): Promise<{ socket: Socket; received: () => string; closed: Promise<number> }> {
  const { host, port } = hostPort(baseUrl);
  return new Promise((ok, fail) => {
    const socket = connect(port, host);
    let text = "";
    const opened = Date.now();
    const closed = new Promise<number>((done) => socket.once("close", () => done(Date.now() - opened)));
    socket.on("data", (d: Buffer) => (text += d.toString("utf8")));
    socket.on("error", () => undefined);
    socket.once("connect", () => ok({ socket, received: () => text, closed }));
    socket.once("error", fail);
  });
}

const within = <T>(ms: number, what: string, p: Promise<T>): Promise<T> =>
  Promise.race([p, new Promise<T>((_, fail) => setTimeout(() => fail(new Error(`${what}: nothing within ${ms} ms`)), ms).unref())]);

/** The JSON body of a raw HTTP answer. */
const jsonOf = (raw: string) => JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4));

describe("Idempotency-Key replays", () => {
  const suite = usePlatform({ RATE_LIMIT_MAX: "100000", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });

  it("never hands a key refused 403 the answer another key got with the same Idempotency-Key", async () => {
    const { p, acme } = suite;
    const writer = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body: { name: "writer", scopes: ["api-keys:write"] } });
    expect(writer.status).toBe(201);
    const body = { name: "root", scopes: ["org:admin"] };
    // The writer may not mint an admin key…
    expectError(await api(p.baseUrl, "POST", "/api-keys", { key: writer.body.data.key, body }), 403, "insufficient_scope");
    const headers = { "idempotency-key": "admin-mint-1" };
    const admin = await api(p.baseUrl, "POST", "/api-keys", { key: acme.live, body, headers });
    expect(admin.status).toBe(201);
    // …nor receive the one the admin minted by replaying its Idempotency-Key.
    const replayed = await api(p.baseUrl, "POST", "/api-keys", { key: writer.body.data.key, body, headers });
    expectError(replayed, 409, "idempotency_key_reused", "Idempotency-Key");
    expect(JSON.stringify(replayed.body)).not.toContain(admin.body.data.key);
  });

  it("fingerprints the query string too", async () => {
    const { p, acme } = suite;
    const headers = { "idempotency-key": "query-1" };
    const body = { type: "order.created", data: {} };
    expect((await api(p.baseUrl, "POST", "/events?a=1", { key: acme.live, body, headers })).headers["idempotent-replayed"]).toBeUndefined();
    expectError(
      await api(p.baseUrl, "POST", "/events?a=2", { key: acme.live, body, headers }),
      409,
      "idempotency_key_reused",
      "Idempotency-Key",
    );
    expect((await api(p.baseUrl, "POST", "/events?a=1", { key: acme.live, body, headers })).headers["idempotent-replayed"]).toBe("true");
  });

  it("stores no secret: a replay of POST /api-keys, POST /webhooks and rotate-secret answers the secret as null, marked", async () => {
    const { p, acme } = suite;
    const created = { name: "ci", scopes: ["events:read"] };
    const first = await api(p.baseUrl, "POST", "/api-keys", {
      key: acme.live,
      body: created,
      headers: { "idempotency-key": "secret-key-1" },
    });
    expect(first.body.data.key).toMatch(/^svc_live_/);
    const again = await api(p.baseUrl, "POST", "/api-keys", {
      key: acme.live,
      body: created,
      headers: { "idempotency-key": "secret-key-1" },
    });
    expect(again.status).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.headers["secret-redacted"]).toBe("key");
    expect(again.body.data).toEqual({ ...first.body.data, key: null });

    const hook = { url: "http://127.0.0.1:9/hook", events: ["order.created"] };
    const wh = await api(p.baseUrl, "POST", "/webhooks", { key: acme.test, body: hook, headers: { "idempotency-key": "secret-wh-1" } });
    expect(wh.body.data.secret).toMatch(/^whsec_/);
    const whAgain = await api(p.baseUrl, "POST", "/webhooks", {
      key: acme.test,
      body: hook,
      headers: { "idempotency-key": "secret-wh-1" },
    });
    expect(whAgain.headers["secret-redacted"]).toBe("secret");
    expect(whAgain.body.data).toEqual({ ...wh.body.data, secret: null });

    const rotatePath = `/webhooks/${wh.body.data.id}/rotate-secret`;
    const rotated = await api(p.baseUrl, "POST", rotatePath, { key: acme.test, headers: { "idempotency-key": "secret-rot-1" } });
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    const rotAgain = await api(p.baseUrl, "POST", rotatePath, { key: acme.test, headers: { "idempotency-key": "secret-rot-1" } });
    expect(rotAgain.body.data.secret).toBeNull();
    expect(rotAgain.headers["secret-redacted"]).toBe("secret");

    // What the store keeps for replays holds none of the three.
    const db = new DatabaseSync(join(p.dataDir, DATABASE_FILE), { readOnly: true });
    try {
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%idempotency%'").all() as {
        name: string;
      }[];
      expect(tables).toHaveLength(1);
      const rows = JSON.stringify(db.prepare(`SELECT * FROM ${tables[0].name}`).all());
      expect(rows).toContain(wh.body.data.id);
      for (const secret of [first.body.data.key, wh.body.data.secret, rotated.body.data.secret]) expect(rows).not.toContain(secret);
    } finally {
      db.close();
    }
  });
});

describe("authentication before the body", () => {
  const suite = usePlatform({ RATE_LIMIT_MAX: "100000", HTTP_HEADERS_TIMEOUT_MS: "500", HTTP_BODY_TIMEOUT_MS: "1000" });

  it("answers 401 to a request without a key without parsing its body", async () => {
    const { p } = suite;
    const res = await api(p.baseUrl, "POST", "/api-keys", { raw: "{not json", headers: { "content-type": "application/json" } });
    expectError(res, 401, "missing_api_key");
    expect(res.headers.connection).toBe("close");
  });

  it("answers 401 at once to headers announcing a body it will never get, and closes", async () => {
    const { p } = suite;
    const { socket, received, closed } = await rawSocket(p.baseUrl);
    socket.write("POST /v1/api-keys HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{");
    const ms = await within(400, "a 401", closed);
    expect(ms).toBeLessThan(400);
    expect(received()).toMatch(/^HTTP\/1\.1 401 /);
    expect(jsonOf(received()).error.code).toBe("missing_api_key");
  });

  it("answers a body still arriving after HTTP_BODY_TIMEOUT_MS with 408 request_timeout, and closes", async () => {
    const { p, acme } = suite;
    const { socket, received, closed } = await rawSocket(p.baseUrl);
    socket.write(
      `POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acme.live}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"type":`,
    );
    const drip = setInterval(() => socket.writable && socket.write(" "), 200);
    try {
      const ms = await within(3_000, "a 408", closed);
      expect(ms).toBeGreaterThanOrEqual(900);
      expect(ms).toBeLessThan(2_000);
    } finally {
      clearInterval(drip);
    }
    expect(received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(received().toLowerCase()).toContain("connection: close");
    const error = jsonOf(received()).error;
    expect(error).toMatchObject({ type: "invalid_request_error", code: "request_timeout" });
    expect(error.request_id).toMatch(/^req_/);
  });

  it("answers headers still arriving after HTTP_HEADERS_TIMEOUT_MS with 408 in the contract's shape, and closes", async () => {
    const { p } = suite;
    const { socket, received, closed } = await rawSocket(p.baseUrl);
    socket.write("GET /v1/api-keys HTTP/1.1\r\nHost: x\r\n");
    const drip = setInterval(() => socket.writable && socket.write("X-Slow: 1\r\n"), 100);
    try {
      const ms = await within(3_000, "a 408", closed);
      expect(ms).toBeLessThan(1_500);
    } finally {
      clearInterval(drip);
    }
    expect(received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(jsonOf(received()).error).toMatchObject({ type: "invalid_request_error", code: "request_timeout" });
  });

  it("answers an over-long bearer token 401 invalid_api_key, naming nothing internal", async () => {
    const { p } = suite;
    const res = await api(p.baseUrl, "GET", "/api-keys", { key: `svc_live_${"a".repeat(10 * 1024)}` });
    expectError(res, 401, "invalid_api_key");
    expect(res.body.error.param).toBeUndefined();
  });
});

describe("time-outs by default", () => {
  it("gives a client 10 s for its headers and 30 s for its body, not Node's 300 s", async () => {
    expect(loadSettings({})).toMatchObject({ httpHeadersTimeoutMs: 10_000, httpBodyTimeoutMs: 30_000 });
    const p = await startPlatform();
    try {
      const server = (p.broker.getLocalService("gateway") as unknown as { server: { headersTimeout: number; requestTimeout: number } })
        .server;
      expect(server.headersTimeout).toBe(10_000);
      expect(server.requestTimeout).toBeLessThanOrEqual(41_000);
    } finally {
      await p.stop();
    }
  });
});

describe("budgets beside the per-key rate limit", () => {
  let p: Platform | undefined;
  afterEach(async () => {
    await p?.stop();
    p = undefined;
  });

  it("holds every key of an organization to RATE_LIMIT_ORG_MAX together", async () => {
    p = await startPlatform({
      RATE_LIMIT_MAX: "5",
      RATE_LIMIT_ORG_MAX: "8",
      RATE_LIMIT_WINDOW_MS: "60000",
      RATE_LIMIT_ADDRESS_MAX: "1000",
    });
    const acme = await p.createOrg("Acme");
    const globex = await p.createOrg("Globex");
    const statuses: number[] = [];
    for (let i = 0; i < 5; i += 1) statuses.push((await api(p.baseUrl, "GET", "/me", { key: acme.live })).status);
    for (let i = 0; i < 4; i += 1) statuses.push((await api(p.baseUrl, "GET", "/me", { key: acme.test })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429]);
    const refused = await api(p.baseUrl, "GET", "/me", { key: acme.test });
    expectError(refused, 429, "rate_limited");
    expect(refused.body.error.message).toContain("organization");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThan(0);
    expect(refused.headers["ratelimit-limit"]).toBe("8");
    expect((await api(p.baseUrl, "GET", "/me", { key: globex.live })).status).toBe(200);
  });

  it("limits requests without a valid key per address, to what one key may send", async () => {
    p = await startPlatform({ RATE_LIMIT_MAX: "3", RATE_LIMIT_WINDOW_MS: "60000", RATE_LIMIT_ADDRESS_MAX: "1000" });
    const statuses: number[] = [];
    for (const key of ["nope", `svc_live_${"x".repeat(43)}`, undefined, "again"])
      statuses.push((await api(p.baseUrl, "GET", "/api-keys", { key })).status);
    expect(statuses).toEqual([401, 401, 401, 429]);
    const refused = await api(p.baseUrl, "GET", "/api-keys");
    expectError(refused, 429, "rate_limited");
    expect(refused.body.error.message).toContain("address");
  });

  it("limits every request of an address, /health and /ready included, to RATE_LIMIT_ADDRESS_MAX", async () => {
    p = await startPlatform({ RATE_LIMIT_ADDRESS_MAX: "4", RATE_LIMIT_WINDOW_MS: "60000" });
    const statuses: number[] = [];
    for (const path of ["/health", "/ready", "/health", "/ready", "/health", "/ready"])
      statuses.push((await api(p.baseUrl.replace(/\/v1$/, ""), "GET", path)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    // Without TRUST_PROXY, X-Forwarded-For is the client's word, not its address.
    const forwarded = await api(p.baseUrl.replace(/\/v1$/, ""), "GET", "/health", { headers: { "x-forwarded-for": "203.0.113.9" } });
    expectError(forwarded, 429, "rate_limited");
  });

  it("with TRUST_PROXY, takes the address the proxy appended to X-Forwarded-For", async () => {
    p = await startPlatform({ RATE_LIMIT_ADDRESS_MAX: "2", RATE_LIMIT_WINDOW_MS: "60000", TRUST_PROXY: "true" });
    const base = p.baseUrl.replace(/\/v1$/, "");
    const from = (chain: string) => api(base, "GET", "/health", { headers: { "x-forwarded-for": chain } });
    expect([
      (await from("203.0.113.1")).status,
      (await from("198.51.100.7, 203.0.113.1")).status,
      (await from("203.0.113.1")).status,
    ]).toEqual([200, 200, 429]);
    // The client's own entries (left of the proxy's) do not buy it a fresh budget.
    expect((await from("10.9.9.9, 203.0.113.1")).status).toBe(429);
    expect((await from("203.0.113.2")).status).toBe(200);
  });

  it("keys an IPv6 client's budget on its /64, and an IPv4-mapped address on its IPv4 form", async () => {
    p = await startPlatform({ RATE_LIMIT_ADDRESS_MAX: "2", RATE_LIMIT_WINDOW_MS: "60000", TRUST_PROXY: "true" });
    const base = p.baseUrl.replace(/\/v1$/, "");
    const from = async (address: string) => (await api(base, "GET", "/health", { headers: { "x-forwarded-for": address } })).status;
    // One subscriber's /64 holds 2^64 addresses: rotating through them buys no new budget.
    expect([await from("2001:db8:1:2::1"), await from("2001:DB8:1:2:ffff:ffff:ffff:ffff"), await from("2001:db8:1:2:abcd::7")]).toEqual([
      200, 200, 429,
    ]);
    expect(await from("2001:db8:1:3::1")).toBe(200);
    expect([await from("203.0.113.5"), await from("::ffff:203.0.113.5"), await from("::ffff:203.0.113.5")]).toEqual([200, 200, 429]);
  });
});

describe("parameters from one place", () => {
  const suite = usePlatform({ RATE_LIMIT_MAX: "100000" });

  it("refuses query parameters on POST and PATCH, which take their parameters in the JSON body", async () => {
    const { p, acme } = suite;
    const before = (await api(p.baseUrl, "GET", "/api-keys", { key: acme.live })).body.meta.total;
    const body = { name: "reader", scopes: ["events:read"] };
    const minted = await api(p.baseUrl, "POST", "/api-keys?scopes=org:admin", { key: acme.live, body });
    expectError(minted, 400, "parameter_unknown", "scopes");
    expect(minted.body.error.message).toMatch(/query.*JSON body/);
    expectError(await api(p.baseUrl, "POST", "/api-keys?name=x", { key: acme.live, body }), 400, "parameter_unknown", "name");
    expect((await api(p.baseUrl, "GET", "/api-keys", { key: acme.live })).body.meta.total).toBe(before);
    const org = acme.org.id;
    expectError(
      await api(p.baseUrl, "PATCH", `/orgs/${org}?name=Evil`, { key: acme.live, body: { name: "Acme" } }),
      400,
      "parameter_unknown",
      "name",
    );
    const got = await api(p.baseUrl, "GET", `/orgs/${org}`, { key: acme.live });
    expect(got.body).toMatchObject({ data: { name: "Acme" } });
  });

  it("refuses a parameter sent in both the query and a body of a GET", async () => {
    const { p, acme } = suite;
    const res = await api(p.baseUrl, "GET", "/events?type=a.b", { key: acme.live, body: { type: "c.d" } });
    expectError(res, 400, "parameter_invalid", "type");
  });
});

describe("page numbers", () => {
  const suite = usePlatform({ RATE_LIMIT_MAX: "100000" });

  it("takes only plain decimal integers for page, per_page and limit", async () => {
    const { p, acme } = suite;
    for (const [query, param] of [
      ["page=1e1", "page"],
      ["per_page=0x10", "per_page"],
      ["limit=1e1", "limit"],
      ["page=%201", "page"],
      ["per_page=1.0", "per_page"],
      ["page=1&page=2", "page"],
    ]) {
      expectError(await api(p.baseUrl, "GET", `/events?${query}`, { key: acme.live }), 400, "parameter_invalid", param);
    }
    const ok = await api(p.baseUrl, "GET", "/events?page=2&per_page=16", { key: acme.live });
    expect(ok.status).toBe(200);
    expect(ok.body.meta).toMatchObject({ page: 2, per_page: 16 });
  });
});

describe("after a store outage", () => {
  it("answers at once when the store is back (the breaker does not count storage failures), as /ready says", async () => {
    // A cluster in this process: a gateway node and a services node over Moleculer's in-memory
    // transporter, with time-outs and the circuit breaker on as between processes.
    const dataDir = mkdtempSync(join(tmpdir(), "wfp-breaker-"));
    const env = {
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "false",
      DATA_DIR: dataDir,
      TRANSPORTER: "nats://in-memory:4222",
      RATE_LIMIT_MAX: "100000",
    };
    let outage = false;
    const real = openStore({ dataDir: env.DATA_DIR, mongoUrl: undefined });
    const failing = <T extends object>(target: T): T =>
      new Proxy(target, {
        get(obj, prop, receiver) {
          const value = Reflect.get(obj, prop, receiver);
          if (typeof value !== "function") return value;
          return (...args: unknown[]) => {
            if (prop === "collection") return failing(value.apply(obj, args));
            if (outage && prop !== "close")
              throw new ApiError("storage_unavailable", "The store could not complete the operation (test outage); retry later", {
                retry_after: 1,
                reason: "test outage",
              });
            return value.apply(obj, args);
          };
        },
      });
    const services = createBroker(
      loadSettings({ ...env, SERVICES: "auth,keys,orgs,events,webhooks,workflows,analytics", NODE_ID: "services" }),
      { transporter: "Fake" },
      failing(real as Store),
    );
    const gateway = createBroker(loadSettings({ ...env, SERVICES: "gateway", NODE_ID: "gateway" }), { transporter: "Fake" });
    await services.start();
    await gateway.start();
    try {
      await gateway.waitForServices(["auth", "keys", "orgs"]);
      const port = (gateway.getLocalService("gateway") as unknown as { server: { address(): { port: number } } }).server.address().port;
      const base = `http://127.0.0.1:${port}`;
      const org = await services.call<{ api_keys: { key: string; environment: string }[] }, { name: string }>("orgs.create", {
        name: "Acme",
      });
      const key = org.api_keys.find((k) => k.environment === "live")!.key;
      expect((await api(`${base}/v1`, "GET", "/api-keys", { key })).status).toBe(200);

      outage = true;
      for (let i = 0; i < 25; i += 1) expectError(await api(`${base}/v1`, "GET", "/api-keys", { key }), 503, "storage_unavailable");
      outage = false;

      expect((await api(base, "GET", "/ready")).status).toBe(200);
      const after = await api(`${base}/v1`, "GET", "/api-keys", { key });
      expect(after.status).toBe(200);
    } finally {
      await gateway.stop();
      await services.stop();
      await real.close().catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("stopping a gateway", () => {
  it("answers a request in flight with Connection: close", async () => {
    const p = await startPlatform({ RATE_LIMIT_MAX: "1000000" });
    const org = await p.createOrg("Acme");
    const { socket, received, closed } = await rawSocket(p.baseUrl);
    const gateway = p.broker.getLocalService("gateway") as unknown as { received: number; stopping: boolean };
    const read = gateway.received;
    const body = JSON.stringify({ type: "order.created", data: {} });
    socket.write(
      `POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${org.live}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
    );
    await waitFor("the gateway to read the request's head", () => gateway.received > read, 3_000);
    const stopping = p.stop();
    await waitFor("the gateway to be stopping", () => gateway.stopping, 3_000);
    socket.write(body.slice(5));
    await within(3_000, "the answer", closed);
    await within(3_000, "the gateway to stop", stopping);
    expect(received()).toMatch(/^HTTP\/1\.1 (201|503) /);
    expect(received().toLowerCase()).toContain("connection: close");
  });

  it("lets no kept-alive client hold it open", async () => {
    const p = await startPlatform({ RATE_LIMIT_MAX: "1000000" });
    const { host, port } = hostPort(p.baseUrl);
    const org = await p.createOrg("Acme");
    // Two requests always in flight on one kept-alive connection: it is never idle.
    const client = new Client(`http://${host}:${port}`, { pipelining: 2, keepAliveTimeout: 60_000 });
    let sending = true;
    const seen: { status: number; connection?: string }[] = [];
    let failures = 0;
    const loop = async () => {
      while (sending) {
        try {
          const res = await client.request({ method: "GET", path: "/v1/me", headers: { authorization: `Bearer ${org.live}` } });
          await res.body.text();
          seen.push({ status: res.statusCode, connection: res.headers.connection as string | undefined });
        } catch {
          failures += 1;
          if (failures > 50) return;
          // A client's pause before it tries again, not a wait for a state.
          await new Promise((r) => setTimeout(r, 10));
        }
      }
    };
    const loops = [loop(), loop()];
    try {
      await waitFor("the two loops answered", () => seen.length > 10, 5_000);
      const before = seen.length;
      const started = Date.now();
      await within(5_000, "the gateway to stop", p.stop());
      const stopMs = Date.now() - started;
      expect(stopMs).toBeLessThan(3_000);
      // What it answered meanwhile it answered in full (a request it no longer takes: 503, closed).
      for (const r of seen.slice(before)) expect(r.status === 200 || (r.status === 503 && r.connection === "close")).toBe(true);
    } finally {
      sending = false;
      await Promise.all(loops);
      await client.destroy();
    }
  });
});
