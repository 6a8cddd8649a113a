import { createHmac } from "node:crypto";
import fc from "fast-check";
import {
  checkWebhookTrigger,
  dedupeKeyOf,
  hookSecrets,
  passesFilter,
  planHook,
  requestView,
  verifyRequest,
} from "../../../../services/workflows/hooks.logic";
import type { HookVerify } from "../../../../shared/api/wire";

const SECRET = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);
const ts = Math.floor(NOW / 1000);
const standard = (raw: string, secret = SECRET, at = ts, id = "msg_1") => ({
  "webhook-id": id,
  "webhook-timestamp": String(at),
  "webhook-signature": `v1,${createHmac("sha256", Buffer.from(secret.slice(6), "base64"))
    .update(`${id}.${at}.${raw}`)
    .digest("base64")}`,
});
const verify = (v: HookVerify, headers: Record<string, string>, raw: string, secrets = [SECRET]) =>
  verifyRequest(v, secrets, headers, raw, NOW);

describe("verifyRequest", () => {
  const raw = '{"a":1}';

  it("takes Standard Webhooks signatures, from a list, within the tolerance", () => {
    const v: HookVerify = { scheme: "standard_webhooks", tolerance_s: 300 };
    expect(verify(v, standard(raw), raw)).toBeNull();
    const listed = standard(raw);
    listed["webhook-signature"] = `v1,${Buffer.alloc(32).toString("base64")} ${listed["webhook-signature"]}`;
    expect(verify(v, listed, raw)).toBeNull();
    expect(verify(v, standard(raw, SECRET, ts - 301), raw)).toBe("stale_timestamp");
    expect(verify(v, standard(raw, SECRET, ts + 301), raw)).toBe("stale_timestamp");
    expect(verify(v, { ...standard(raw), "webhook-timestamp": "soon" }, raw)).toBe("malformed_signature");
    expect(verify(v, { ...standard(raw), "webhook-signature": "v2,abc" }, raw)).toBe("malformed_signature");
    expect(verify(v, {}, raw)).toBe("missing_signature");
    expect(verify(v, standard(raw), `${raw} `)).toBe("bad_signature");
  });

  it("takes the rotated-out secret beside the current one", () => {
    const old = `whsec_${Buffer.alloc(32, 1).toString("base64")}`;
    const v: HookVerify = { scheme: "standard_webhooks" };
    expect(verify(v, standard(raw, old), raw, [SECRET, old])).toBeNull();
    expect(verify(v, standard(raw, old), raw, [SECRET])).toBe("bad_signature");
    expect(verify(v, standard(raw), raw, [])).toBe("secret_unavailable");
  });

  it("takes Stripe-Signature with any of its v1 entries", () => {
    const v: HookVerify = { scheme: "stripe", tolerance_s: 300 };
    const sig = createHmac("sha256", SECRET).update(`${ts}.${raw}`).digest("hex");
    expect(verify(v, { "stripe-signature": `t=${ts},v1=${"0".repeat(64)},v1=${sig},v0=abc` }, raw)).toBeNull();
    expect(verify(v, { "stripe-signature": `v1=${sig}` }, raw)).toBe("malformed_signature");
    expect(verify(v, { "stripe-signature": `t=${ts - 1000},v1=${sig}` }, raw)).toBe("stale_timestamp");
  });

  it("takes GitHub's header and a configured HMAC header, prefix and encoding", () => {
    const hex = createHmac("sha256", SECRET).update(raw).digest("hex");
    expect(verify({ scheme: "github" }, { "x-hub-signature-256": `sha256=${hex}` }, raw)).toBeNull();
    expect(verify({ scheme: "github" }, { "x-hub-signature-256": hex }, raw)).toBe("malformed_signature");
    const b64 = createHmac("sha256", SECRET).update(raw).digest("base64");
    const custom: HookVerify = { scheme: "hmac_sha256", header: "x-sig", prefix: "v=", encoding: "base64" };
    expect(verify(custom, { "x-sig": `v=${b64}` }, raw)).toBeNull();
    expect(verify(custom, { "x-sig": `v=${hex}` }, raw)).toBe("malformed_signature");
    // This platform's own Service-Signature during a rotation: a list.
    const own: HookVerify = { scheme: "hmac_sha256", header: "service-signature", prefix: "sha256=", encoding: "hex" };
    expect(verify(own, { "service-signature": `sha256=${"1".repeat(64)}, sha256=${hex}` }, raw)).toBeNull();
  });

  it("never throws, whatever the headers and body", () => {
    const schemes: HookVerify[] = [
      { scheme: "standard_webhooks" },
      { scheme: "stripe" },
      { scheme: "github" },
      { scheme: "hmac_sha256", header: "x-signature", prefix: "", encoding: "base64" },
    ];
    fc.assert(
      fc.property(fc.constantFrom(...schemes), fc.dictionary(fc.string(), fc.string()), fc.string(), (v, headers, body) => {
        const lower = Object.fromEntries(Object.entries(headers).map(([k, x]) => [k.toLowerCase(), x]));
        expect(verify(v, { ...lower, ...standard(body) }, `${body}x`)).not.toBeNull();
      }),
    );
  });
});

describe("checkWebhookTrigger", () => {
  it("fills the defaults of each scheme", () => {
    expect(checkWebhookTrigger({ type: "webhook", verify: { scheme: "hmac_sha256" } }).verify).toEqual({
      scheme: "hmac_sha256",
      header: "x-signature",
      prefix: "",
      encoding: "hex",
    });
    expect(checkWebhookTrigger({ type: "webhook", verify: { scheme: "stripe" } }).verify).toEqual({ scheme: "stripe", tolerance_s: 300 });
    expect(checkWebhookTrigger({ type: "webhook", verify: { scheme: "none" }, headers: ["X-Shop", "x-shop"] }).headers).toEqual(["x-shop"]);
  });

  it("names the field at fault", () => {
    const param = (raw: Record<string, unknown>) => {
      try {
        checkWebhookTrigger(raw);
        return null;
      } catch (err) {
        return (err as { data?: { param?: string } }).data?.param;
      }
    };
    expect(param({ type: "webhook" })).toBe("trigger.verify");
    expect(param({ type: "webhook", verify: { scheme: "none", secret: "{{secrets.A}}" } })).toBe("trigger.verify.secret");
    expect(param({ type: "webhook", verify: { scheme: "stripe", tolerance_s: 0 } })).toBe("trigger.verify.tolerance_s");
    expect(param({ type: "webhook", verify: { scheme: "none" }, extra: 1 })).toBe("trigger.extra");
    expect(param({ type: "webhook", verify: { scheme: "none" }, headers: ["cookie"] })).toBe("trigger.headers[0]");
    expect(param({ type: "webhook", verify: { scheme: "none" }, filter: "event.type == 'a'" })).toBe("trigger.filter");
  });
});

describe("the request a run sees", () => {
  const trigger = checkWebhookTrigger({ type: "webhook", verify: { scheme: "none" }, dedupe: { header: "x-id" }, headers: ["x-shop"] });

  it("keeps allow-listed headers, parses JSON bodies and keeps others as text", () => {
    const req = { method: "POST", query: "a=1&a=2&b=x", raw: '{"n":1}' };
    const headers = { "content-type": "application/json", authorization: "Bearer x", "x-shop": "s", "x-id": "7", "x-other": "o" };
    expect(requestView({ ...req, headers }, trigger)).toEqual({
      method: "POST",
      query: { a: ["1", "2"], b: "x" },
      headers: { "content-type": "application/json", "x-shop": "s", "x-id": "7" },
      body: { n: 1 },
    });
    expect(requestView({ ...req, headers: { "content-type": "text/plain" } }, trigger).body).toBe('{"n":1}');
    expect(requestView({ ...req, raw: "{broken", headers: { "content-type": "application/json" } }, trigger).body).toBe("{broken");
    expect(requestView({ ...req, raw: "", headers: {} }, trigger).body).toBeNull();
  });

  it("passes the filter over `request`, and a filter that fails passes nothing", () => {
    const filtered = checkWebhookTrigger({ type: "webhook", verify: { scheme: "none" }, filter: "request.body.n > 0" });
    const view = (raw: string) =>
      requestView({ method: "POST", query: "", raw, headers: { "content-type": "application/json" } }, filtered);
    expect(passesFilter(filtered, view('{"n":1}')).ok).toBe(true);
    expect(passesFilter(filtered, view('{"n":0}')).ok).toBe(false);
    expect(passesFilter(filtered, view("{}"))).toMatchObject({ ok: false, why: expect.stringContaining("the filter failed") });
  });

  it("keys duplicates by the dedupe header, a long value by its digest", () => {
    expect(dedupeKeyOf(trigger, { "x-id": " 7 " })).toBe("7");
    expect(dedupeKeyOf(trigger, {})).toBeNull();
    expect(dedupeKeyOf(trigger, { "x-id": "x".repeat(500) })).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe("planHook", () => {
  const ids = { hookId: () => "hk_new", secret: () => "whsec_new" };
  const github = { type: "webhook", verify: { scheme: "github" } as HookVerify };

  it("makes a hook and its secret once, keeps them through later writes, and drops them with the trigger", () => {
    const made = planHook(github, undefined, ids);
    expect(made).toEqual({ hook: { id: "hk_new", secret: "whsec_new" }, shown: "whsec_new" });
    expect(planHook(github, { id: "hk_old", secret: "whsec_old", refused: 3 }, ids)).toEqual({
      hook: { id: "hk_old", secret: "whsec_old", refused: 3 },
      shown: undefined,
    });
    const stored = { type: "webhook", verify: { scheme: "github", secret: "{{secrets.GH}}" } as HookVerify };
    expect(planHook(stored, { id: "hk_old", secret: "whsec_old" }, ids)).toEqual({ hook: { id: "hk_old" }, shown: undefined });
    expect(planHook({ type: "manual" }, { id: "hk_old" }, ids)).toEqual({ hook: undefined, shown: undefined });
  });

  it("accepts a rotated-out secret until its overlap ends", () => {
    const hook = { id: "hk", secret: "new", previous_secret: { secret: "old", expires_at: new Date(NOW + 1000).toISOString() } };
    expect(hookSecrets(hook, NOW)).toEqual(["new", "old"]);
    expect(hookSecrets(hook, NOW + 1000)).toEqual(["new"]);
  });
});
