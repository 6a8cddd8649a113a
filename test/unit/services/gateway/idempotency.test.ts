import { fingerprintOf, withoutSecret } from "../../../../services/gateway/idempotency";

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

  it("keep an answer without its secret field", () => {
    expect(withoutSecret({ data: { id: "key_1", key: "svc_live_x" } }, "key")).toEqual({
      body: { data: { id: "key_1", key: null } },
      redacted: "key",
    });
    expect(withoutSecret({ error: { code: "x" } }, "key")).toEqual({ body: { error: { code: "x" } }, redacted: null });
  });
});
