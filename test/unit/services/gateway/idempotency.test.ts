import { canonicalJson, fingerprintOf, withoutSecret } from "../../../../services/gateway/idempotency";

describe("idempotency fingerprints and secrets", () => {
  it("differ by calling key, method, path, query and body", () => {
    const base = fingerprintOf("key_a", "POST", "/v1/x", "a=1", { b: 1 });
    expect(
      new Set([
        base,
        fingerprintOf("key_b", "POST", "/v1/x", "a=1", { b: 1 }),
        fingerprintOf("key_a", "POST", "/v1/y", "a=1", { b: 1 }),
        fingerprintOf("key_a", "POST", "/v1/x", "a=2", { b: 1 }),
        fingerprintOf("key_a", "POST", "/v1/x", "a=1", { b: 2 }),
      ]).size,
    ).toBe(5);
  });

  it("are equal for the same parsed body and query, whatever the order of their keys", () => {
    expect(fingerprintOf("key_a", "POST", "/v1/x", "a=1&b=2", { b: { d: [1, { f: 1, e: 2 }], c: 1 }, a: null })).toBe(
      fingerprintOf("key_a", "POST", "/v1/x", "b=2&a=1", { a: null, b: { c: 1, d: [1, { e: 2, f: 1 }] } }),
    );
    // Arrays keep their order: [1, 2] is not [2, 1].
    expect(fingerprintOf("key_a", "POST", "/v1/x", null, { a: [1, 2] })).not.toBe(
      fingerprintOf("key_a", "POST", "/v1/x", null, { a: [2, 1] }),
    );
    expect(canonicalJson({ b: 1, a: { d: "\n", c: [true, null] } })).toBe('{"a":{"c":[true,null],"d":"\\n"},"b":1}');
  });

  it("keep an answer without its secret field", () => {
    expect(withoutSecret({ data: { id: "key_1", key: "svc_live_x" } }, "key")).toEqual({
      body: { data: { id: "key_1", key: null } },
      redacted: "key",
    });
    expect(withoutSecret({ error: { code: "x" } }, "key")).toEqual({ body: { error: { code: "x" } }, redacted: null });
  });

  it("keep an answer without each secret field it holds, naming them", () => {
    const fields = ["signing_secret", "hook_secret"];
    expect(withoutSecret({ data: { id: "wf_1", signing_secret: "a", hook_secret: "b" } }, fields)).toEqual({
      body: { data: { id: "wf_1", signing_secret: null, hook_secret: null } },
      redacted: "signing_secret, hook_secret",
    });
    expect(withoutSecret({ data: { id: "wf_1", signing_secret: "a" } }, fields)).toEqual({
      body: { data: { id: "wf_1", signing_secret: null } },
      redacted: "signing_secret",
    });
  });
});
