import { createHmac } from "node:crypto";
import fc from "fast-check";
import { HOOK_SCHEMES, verifyRequest } from "../../../../services/workflows/hooks.logic";
import type { HookVerify } from "../../../../shared/api/wire";
import { inboundSignature, isSignedScheme, SIGNED_SCHEMES } from "../../../../shared/net/inbound-signing";

const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);
const SECRET = `whsec_${Buffer.alloc(32, 3).toString("base64")}`;
const OTHER = `whsec_${Buffer.alloc(32, 4).toString("base64")}`;

describe("inboundSignature", () => {
  it("signs GitHub's documented example as GitHub does", () => {
    // docs.github.com, "Validating webhook deliveries": the secret, the payload and the header it gives.
    expect(inboundSignature({ scheme: "github" }, "It's a Secret to Everybody", "Hello, World!")).toEqual({
      "x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    });
  });

  it("signs the Standard Webhooks reference example as its libraries do", () => {
    const headers = inboundSignature({ scheme: "standard_webhooks" }, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", '{"test": 2432232314}', {
      id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
      nowMs: 1614265330_000,
    });
    expect(headers).toEqual({
      "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    });
  });

  it("signs Stripe-Signature as t and the hex HMAC of `t.body` keyed with the whole secret", () => {
    const raw = '{"type":"invoice.paid"}';
    const t = Math.floor(NOW / 1000);
    expect(inboundSignature({ scheme: "stripe" }, SECRET, raw, { nowMs: NOW })).toEqual({
      "stripe-signature": `t=${t},v1=${createHmac("sha256", SECRET).update(`${t}.${raw}`).digest("hex")}`,
    });
  });

  it("puts a configured header's prefix and digest encoding in, and signs nothing for none", () => {
    const raw = "a=1&b=2\n";
    const verify: HookVerify = { scheme: "hmac_sha256", header: "X-Shopify-Hmac-Sha256", prefix: "", encoding: "base64" };
    expect(inboundSignature(verify, "shpss_1", raw)).toEqual({
      "x-shopify-hmac-sha256": createHmac("sha256", "shpss_1").update(raw).digest("base64"),
    });
    expect(inboundSignature({ scheme: "hmac_sha256" }, "k", raw)).toEqual({
      "x-signature": createHmac("sha256", "k").update(raw).digest("hex"),
    });
    expect(inboundSignature({ scheme: "none" }, "", raw)).toEqual({});
  });

  it("knows every scheme a hook takes, and no other", () => {
    expect([...SIGNED_SCHEMES].sort()).toEqual([...HOOK_SCHEMES].sort());
    for (const other of ["shopify", "", null, undefined, 5]) expect(isSignedScheme(other)).toBe(false);
  });

  const verifyArb: fc.Arbitrary<HookVerify> = fc.oneof(
    fc.constantFrom<HookVerify>({ scheme: "standard_webhooks" }, { scheme: "stripe" }, { scheme: "github" }),
    fc.record({
      scheme: fc.constant("hmac_sha256" as const),
      header: fc.stringMatching(/^x-[a-z0-9-]{1,20}$/),
      prefix: fc.stringMatching(/^[\x21-\x2b\x2d-\x7e]{0,10}$/),
      encoding: fc.constantFrom("hex" as const, "base64" as const),
    }),
  );
  const secretArb = fc.oneof(
    fc.uint8Array({ minLength: 16, maxLength: 48 }).map((b) => `whsec_${Buffer.from(b).toString("base64")}`),
    fc.string({ minLength: 1, maxLength: 40 }),
  );

  it("is verified by the platform in every scheme, and refused with another secret or a changed body", () => {
    fc.assert(
      fc.property(
        verifyArb,
        secretArb.filter((s) => s !== OTHER),
        fc.string({ maxLength: 200, unit: "grapheme" }),
        (verify, secret, raw) => {
          const headers = inboundSignature(verify, secret, raw, { nowMs: NOW });
          expect(verifyRequest(verify, [secret], headers, raw, NOW)).toBeNull();
          expect(verifyRequest(verify, [OTHER], headers, raw, NOW)).toBe("bad_signature");
          expect(verifyRequest(verify, [secret], headers, `${raw} `, NOW)).toBe("bad_signature");
        },
      ),
    );
  });
});
