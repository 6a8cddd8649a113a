import { createHmac, randomUUID } from "node:crypto";
import fc from "fast-check";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";

/**
 * Inbound webhooks (issue 32): `POST /v1/hooks/{hook_id}` with requests signed here as each
 * provider signs them (node:crypto), accepted, and every forgery refused 401 with nothing stored.
 */
const suite = usePlatform({
  RATE_LIMIT_MAX: "100000",
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  SECRETS_KEYS: `k1:${Buffer.alloc(32, 7).toString("base64")}`,
});

const STEPS = [{ id: "echo", type: "set", output: { body: "{{ input.request.body }}" } }];

async function hookWorkflow(key: string, trigger: Record<string, unknown>, steps: unknown[] = STEPS) {
  const res = await api(suite.p.baseUrl, "POST", "/workflows", { key, body: { name: "inbound", trigger, steps } });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; hook: { id: string; url: string }; hook_secret?: string };
}

/** Sends `raw` to a hook as a provider would: the body's bytes exactly, with its headers (answers held to the API reference). */
function send(url: string, raw: string, headers: Record<string, string> = {}, query = "") {
  return api(suite.p.baseUrl, "POST", `${url.replace(/^\/v1/, "")}${query}`, {
    raw,
    headers: { "content-type": "application/json", ...headers },
  });
}

const now = () => Math.floor(Date.now() / 1000);
const b64key = (secret: string) => Buffer.from(secret.slice("whsec_".length), "base64");
/** Standard Webhooks: `v1,` + base64 HMAC of `id.timestamp.body`, keyed with the secret's base64 part. */
function standardHeaders(secret: string, raw: string, id = `msg_${randomUUID()}`, ts = now()) {
  const sig = createHmac("sha256", b64key(secret)).update(`${id}.${ts}.${raw}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": `v1,${sig}` };
}
/** Stripe: `t=<ts>,v1=<hex HMAC of "t.body">`, keyed with the whole secret. */
function stripeHeader(secret: string, raw: string, ts = now()) {
  return { "stripe-signature": `t=${ts},v1=${createHmac("sha256", secret).update(`${ts}.${raw}`).digest("hex")}` };
}
/** GitHub: `X-Hub-Signature-256: sha256=<hex HMAC of the body>`. */
function githubHeader(secret: string, raw: string) {
  return { "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}` };
}

async function runOf(key: string, workflowId: string, runId: string) {
  const res = await api(suite.p.baseUrl, "GET", `/workflows/${workflowId}/runs/${runId}`, { key });
  expect(res.status).toBe(200);
  return res.body.data;
}

async function runsOf(key: string, workflowId: string): Promise<number> {
  const res = await api(suite.p.baseUrl, "GET", `/workflows/${workflowId}/runs`, { key });
  return res.body.data.length;
}

describe("POST /hooks/{hook_id} with Standard Webhooks", () => {
  it("starts a run with the request as input, and answers a replayed id with the first run", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, {
      type: "webhook",
      verify: { scheme: "standard_webhooks" },
      dedupe: { header: "webhook-id" },
    });
    expect(wf.hook.url).toBe(`/v1/hooks/${wf.hook.id}`);
    expect(wf.hook_secret).toMatch(/^whsec_/);
    const raw = JSON.stringify({ type: "invoice.paid", amount: 1250 });
    const headers = standardHeaders(wf.hook_secret!, raw);
    const first = await send(wf.hook.url, raw, headers, "?source=test");
    expect(first).toMatchObject({ status: 202, body: { data: { object: "hook_receipt", duplicate: false } } });
    const runId = first.body.data.run_id;
    const again = await send(wf.hook.url, raw, headers);
    expect(again).toMatchObject({ status: 200, body: { data: { run_id: runId, duplicate: true } } });
    await waitFor("the run to succeed", async () => (await runOf(acme.live, wf.id, runId)).status === "succeeded");
    const run = await runOf(acme.live, wf.id, runId);
    expect(run.trigger).toMatchObject({ type: "webhook", hook_id: wf.hook.id, dedupe_key: headers["webhook-id"] });
    expect(run.input.request).toEqual({
      method: "POST",
      query: { source: "test" },
      headers: expect.objectContaining({ "content-type": "application/json", "webhook-id": headers["webhook-id"] }),
      body: { type: "invoice.paid", amount: 1250 },
    });
    expect(run.input.request.headers["webhook-signature"]).toBeUndefined();
    expect(run.steps[0].output).toEqual({ body: { type: "invoice.paid", amount: 1250 } });
    expect(await runsOf(acme.live, wf.id)).toBe(1);
  });

  it("refuses a wrong secret, a stale timestamp and a body changed by one byte, storing nothing, and counts them", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "standard_webhooks" } });
    const raw = JSON.stringify({ n: 1 });
    const other = `whsec_${Buffer.alloc(32, 1).toString("base64")}`;
    expectError(await send(wf.hook.url, raw, standardHeaders(other, raw)), 401, "invalid_signature");
    expectError(await send(wf.hook.url, raw, standardHeaders(wf.hook_secret!, raw, "msg_old", now() - 301)), 401, "invalid_signature");
    const changed = raw.replace("1", "2");
    expectError(await send(wf.hook.url, changed, standardHeaders(wf.hook_secret!, raw)), 401, "invalid_signature");
    expectError(await send(wf.hook.url, raw, {}), 401, "invalid_signature");
    expect(await runsOf(acme.live, wf.id)).toBe(0);
    await waitFor("the refusals to be counted", async () => {
      const got = await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: acme.live });
      return got.body.data.hook.refused === 4;
    });
    const got = await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: acme.live });
    expect(got.body.data.hook).toMatchObject({ accepted: 0, refused: 4, last_refused_reason: "missing_signature" });
  });
});

describe("POST /hooks/{hook_id} with Stripe's, GitHub's and a configured HMAC", () => {
  it("takes Stripe-Signature with a stored secret, within its tolerance only", async () => {
    const { acme } = suite;
    const secret = "whsec_stripe_test_secret";
    expect((await api(suite.p.baseUrl, "POST", "/secrets", { key: acme.live, body: { name: "STRIPE_HOOK", value: secret } })).status).toBe(
      201,
    );
    const wf = await hookWorkflow(acme.live, {
      type: "webhook",
      verify: { scheme: "stripe", secret: "{{secrets.STRIPE_HOOK}}", tolerance_s: 60 },
    });
    expect(wf.hook_secret).toBeUndefined();
    const raw = '{"id":"evt_1","type":"charge.succeeded"}';
    expect((await send(wf.hook.url, raw, stripeHeader(secret, raw))).status).toBe(202);
    expectError(await send(wf.hook.url, raw, stripeHeader(secret, raw, now() - 61)), 401, "invalid_signature");
    expectError(await send(wf.hook.url, raw, stripeHeader("whsec_other", raw)), 401, "invalid_signature");
    expectError(await send(wf.hook.url, `${raw} `, stripeHeader(secret, raw)), 401, "invalid_signature");
    // The stored secret replaced: the new value verifies at once.
    await api(suite.p.baseUrl, "POST", "/secrets", { key: acme.live, body: { name: "STRIPE_HOOK", value: "whsec_rotated" } });
    expect((await send(wf.hook.url, raw, stripeHeader("whsec_rotated", raw))).status).toBe(202);
    expectError(await send(wf.hook.url, raw, stripeHeader(secret, raw)), 401, "invalid_signature");
  });

  it("refuses what a missing stored secret cannot verify, and verifies as soon as the secret is stored", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "stripe", secret: "{{secrets.LATER_HOOK}}" } });
    const raw = "{}";
    expectError(await send(wf.hook.url, raw, stripeHeader("whsec_later", raw)), 401, "invalid_signature");
    await waitFor("the refusal to be counted", async () => {
      const got = await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: acme.live });
      return got.body.data.hook.last_refused_reason === "secret_unavailable";
    });
    await api(suite.p.baseUrl, "POST", "/secrets", { key: acme.live, body: { name: "LATER_HOOK", value: "whsec_later" } });
    expect((await send(wf.hook.url, raw, stripeHeader("whsec_later", raw))).status).toBe(202);
  });

  it("takes GitHub's X-Hub-Signature-256, and a configured header, prefix and base64 digest", async () => {
    const { acme } = suite;
    const gh = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "github" }, headers: ["x-github-event"] });
    const raw = JSON.stringify({ action: "opened", number: 7 });
    const ok = await send(gh.hook.url, raw, { ...githubHeader(gh.hook_secret!, raw), "x-github-event": "pull_request" });
    expect(ok.status).toBe(202);
    expectError(await send(gh.hook.url, raw, githubHeader("nope", raw)), 401, "invalid_signature");

    const custom = await hookWorkflow(acme.live, {
      type: "webhook",
      verify: { scheme: "hmac_sha256", header: "X-Shopify-Hmac-Sha256", prefix: "", encoding: "base64" },
    });
    const digest = createHmac("sha256", custom.hook_secret!).update(raw).digest("base64");
    expect((await send(custom.hook.url, raw, { "x-shopify-hmac-sha256": digest })).status).toBe(202);
    const hex = createHmac("sha256", custom.hook_secret!).update(raw).digest("hex");
    expectError(await send(custom.hook.url, raw, { "x-shopify-hmac-sha256": hex }), 401, "invalid_signature");
  });

  it("takes any request with scheme none, which must be said", async () => {
    const { acme } = suite;
    const res = await api(suite.p.baseUrl, "POST", "/workflows", {
      key: acme.live,
      body: { name: "x", trigger: { type: "webhook" }, steps: STEPS },
    });
    expectError(res, 400, "parameter_invalid", "trigger.verify");
    const wf = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "none" } });
    expect(wf.hook_secret).toBeUndefined();
    expect((await send(wf.hook.url, "hello", { "content-type": "text/plain" })).status).toBe(202);
  });
});

describe("hooks, filters and tenants", () => {
  it("starts no run for a request the filter passes over, and answers it 200", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, {
      type: "webhook",
      verify: { scheme: "none" },
      filter: "request.body.amount >= 500",
    });
    const low = await send(wf.hook.url, JSON.stringify({ amount: 10 }));
    expect(low).toMatchObject({ status: 200, body: { data: { run_id: null, filtered: true } } });
    expect((await send(wf.hook.url, JSON.stringify({ amount: 900 }))).status).toBe(202);
    expect(await runsOf(acme.live, wf.id)).toBe(1);
  });

  it("names the field of a bad trigger", async () => {
    const { acme } = suite;
    const bad = async (trigger: unknown, param: string, code = "parameter_invalid") =>
      expectError(
        await api(suite.p.baseUrl, "POST", "/workflows", { key: acme.live, body: { name: "x", trigger, steps: STEPS } }),
        400,
        code,
        param,
      );
    await bad({ type: "webhook", verify: { scheme: "md5" } }, "trigger.verify.scheme");
    await bad({ type: "webhook", verify: { scheme: "github", header: "x" } }, "trigger.verify.header", "parameter_unknown");
    await bad({ type: "webhook", verify: { scheme: "stripe", secret: "plain" } }, "trigger.verify.secret");
    await bad({ type: "webhook", verify: { scheme: "none" }, filter: "request.body +" }, "trigger.filter");
    await bad({ type: "webhook", verify: { scheme: "none" }, dedupe: { header: "authorization" } }, "trigger.dedupe.header");
  });

  it("answers 404 for an unknown hook, an inactive workflow's and a deleted one's; another tenant's key sees nothing of it", async () => {
    const { acme, globex } = suite;
    const wf = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "none" } });
    expectError(await send("/v1/hooks/hk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "{}"), 404, "resource_not_found");
    expectError(await send("/v1/hooks/short", "{}"), 404, "resource_not_found");
    expectError(await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: globex.live }), 404, "resource_not_found");
    expectError(
      await api(suite.p.baseUrl, "POST", `/workflows/${wf.id}/hook/rotate-secret`, { key: globex.live }),
      404,
      "resource_not_found",
    );
    await api(suite.p.baseUrl, "PATCH", `/workflows/${wf.id}`, { key: acme.live, body: { status: "inactive" } });
    expectError(await send(wf.hook.url, "{}"), 404, "resource_not_found");
    await api(suite.p.baseUrl, "PATCH", `/workflows/${wf.id}`, { key: acme.live, body: { status: "active" } });
    expect((await send(wf.hook.url, "{}")).status).toBe(202);
    await api(suite.p.baseUrl, "DELETE", `/workflows/${wf.id}`, { key: acme.live });
    expectError(await send(wf.hook.url, "{}"), 404, "resource_not_found");
  });

  it("verifies another tenant's hook with its own secret only", async () => {
    const { acme, globex } = suite;
    const mine = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "github" } });
    const theirs = await hookWorkflow(globex.live, { type: "webhook", verify: { scheme: "github" } });
    const raw = "{}";
    expectError(await send(theirs.hook.url, raw, githubHeader(mine.hook_secret!, raw)), 401, "invalid_signature");
    expect((await send(theirs.hook.url, raw, githubHeader(theirs.hook_secret!, raw))).status).toBe(202);
    expect(await runsOf(acme.live, mine.id)).toBe(0);
  });

  it("refuses bodies over 64 KiB (413) and binary media types (415)", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "none" } });
    expectError(await send(wf.hook.url, JSON.stringify({ a: "x".repeat(70_000) })), 413, "payload_too_large");
    expectError(await send(wf.hook.url, "abc", { "content-type": "application/octet-stream" }), 415, "unsupported_media_type");
  });
});

describe("POST /workflows/{id}/hook/rotate-secret", () => {
  it("accepts both secrets during the overlap, and a second rotation retires the first at once", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, { type: "webhook", verify: { scheme: "standard_webhooks" } });
    const raw = "{}";
    const rotated = await api(suite.p.baseUrl, "POST", `/workflows/${wf.id}/hook/rotate-secret`, { key: acme.live });
    expect(rotated.status).toBe(200);
    const second = rotated.body.data.secret as string;
    expect(rotated.body.data.previous_secret_expires_at).toEqual(expect.any(String));
    expect((await send(wf.hook.url, raw, standardHeaders(wf.hook_secret!, raw))).status).toBe(202);
    expect((await send(wf.hook.url, raw, standardHeaders(second, raw))).status).toBe(202);
    const third = (await api(suite.p.baseUrl, "POST", `/workflows/${wf.id}/hook/rotate-secret`, { key: acme.live })).body.data.secret;
    expectError(await send(wf.hook.url, raw, standardHeaders(wf.hook_secret!, raw)), 401, "invalid_signature");
    expect((await send(wf.hook.url, raw, standardHeaders(second, raw))).status).toBe(202);
    expect((await send(wf.hook.url, raw, standardHeaders(third, raw))).status).toBe(202);
  });
});

describe("this platform's own webhook deliveries", () => {
  it("start a run of a workflow whose hook verifies them with the webhook's secret", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, {
      type: "webhook",
      verify: { scheme: "standard_webhooks", secret: "{{secrets.OWN_WEBHOOK}}" },
      dedupe: { header: "webhook-id" },
      filter: "request.body.type == 'order.paid'",
    });
    const origin = suite.p.baseUrl.replace(/\/v1$/, "");
    const webhook = await api(suite.p.baseUrl, "POST", "/webhooks", {
      key: acme.live,
      body: { url: `${origin}${wf.hook.url}`, events: ["order.paid"] },
    });
    expect(webhook.status).toBe(201);
    const stored = await api(suite.p.baseUrl, "POST", "/secrets", {
      key: acme.live,
      body: { name: "OWN_WEBHOOK", value: webhook.body.data.secret },
    });
    expect(stored.status).toBe(201);
    const event = await api(suite.p.baseUrl, "POST", "/events", { key: acme.live, body: { type: "order.paid", data: { order: "o_9" } } });
    expect(event.status).toBe(201);
    await waitFor("the delivery to start a run", async () => (await runsOf(acme.live, wf.id)) === 1);
    const runs = await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}/runs`, { key: acme.live });
    const run = runs.body.data[0];
    expect(run.input.request.body).toMatchObject({ id: event.body.data.id, type: "order.paid", data: { order: "o_9" } });
    expect(run.trigger.dedupe_key).toBe(run.input.request.headers["webhook-id"]);
    await waitFor("the delivery to be recorded as delivered", async () => {
      const list = await api(suite.p.baseUrl, "GET", `/webhooks/${webhook.body.data.id}/deliveries`, { key: acme.live });
      return list.body.data[0]?.status === "succeeded";
    });
  });
});

describe("a hook made and removed by PATCH", () => {
  it("shows the secret a PATCH made, keeps the hook's id while the trigger stays a webhook, and drops it when it does not", async () => {
    const { acme } = suite;
    const made = await api(suite.p.baseUrl, "POST", "/workflows", {
      key: acme.live,
      body: { name: "later", trigger: { type: "manual" }, steps: STEPS },
    });
    expect(made.body.data.hook).toBeUndefined();
    const id = made.body.data.id;
    const patch = (trigger: unknown) => api(suite.p.baseUrl, "PATCH", `/workflows/${id}`, { key: acme.live, body: { trigger } });
    const hooked = await patch({ type: "webhook", verify: { scheme: "github" } });
    expect(hooked.status).toBe(200);
    const { hook, hook_secret: secret } = hooked.body.data;
    expect(secret).toMatch(/^whsec_/);
    expect((await send(hook.url, "{}", githubHeader(secret, "{}"))).status).toBe(202);
    const filtered = await patch({ type: "webhook", verify: { scheme: "github" }, filter: "false" });
    expect(filtered.body.data.hook.id).toBe(hook.id);
    expect(filtered.body.data.hook_secret).toBeUndefined();
    expect((await send(hook.url, "{}", githubHeader(secret, "{}"))).body.data).toMatchObject({ filtered: true });
    expect((await patch({ type: "manual" })).body.data.hook).toBeUndefined();
    expectError(await send(hook.url, "{}", githubHeader(secret, "{}")), 404, "resource_not_found");
  });

  it("keeps no hook secret for an idempotent replay of its creation", async () => {
    const { acme } = suite;
    const body = { name: "replayed", trigger: { type: "webhook", verify: { scheme: "github" } }, steps: STEPS };
    const headers = { "idempotency-key": `hook-${randomUUID()}` };
    const first = await api(suite.p.baseUrl, "POST", "/workflows", { key: acme.live, body, headers });
    expect(first.body.data.hook_secret).toMatch(/^whsec_/);
    const replay = await api(suite.p.baseUrl, "POST", "/workflows", { key: acme.live, body, headers });
    expect(replay.headers["secret-redacted"]).toBe("signing_secret, hook_secret");
    expect(replay.body.data).toMatchObject({ id: first.body.data.id, hook_secret: null, signing_secret: null });
  });
});

describe("random requests to a hook", () => {
  it("never answer a 5xx, and start a run only when signed", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, {
      type: "webhook",
      verify: { scheme: "standard_webhooks" },
      dedupe: { header: "webhook-id" },
    });
    const headerValue = fc.string({ maxLength: 80 }).filter((s) => /^[\x20-\x7e]*$/.test(s));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.json(), fc.string({ maxLength: 200 })),
        fc.record(
          {
            "webhook-id": headerValue,
            "webhook-timestamp": fc.oneof(headerValue, fc.integer({ min: 0, max: 2 ** 40 }).map(String)),
            "webhook-signature": headerValue,
            "content-type": fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", "image/png"),
          },
          { requiredKeys: [] },
        ),
        fc.boolean(),
        fc.oneof(
          fc.constant(""),
          fc.webQueryParameters().map((q) => `?${q}`),
        ),
        async (raw, headers, signed, query) => {
          const sent = signed ? { ...headers, ...standardHeaders(wf.hook_secret!, raw) } : headers;
          const res = await send(wf.hook.url, raw, sent, query);
          expect(res.status).toBeLessThan(500);
          if (!signed) expect([401, 415]).toContain(res.status);
        },
      ),
      { numRuns: 150 },
    );
  });
});
