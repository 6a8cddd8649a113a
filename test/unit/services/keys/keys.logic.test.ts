import { checkGrantable, generateKey, statusOf } from "../../../../services/keys/keys.logic";
import { API_KEY_PATTERN, digestOf } from "../../../../shared/api/identity";

describe("keys logic", () => {
  it("generates svc_live_/svc_test_ keys stored only as a digest", () => {
    const k = generateKey("test");
    expect(k.key).toMatch(/^svc_test_[0-9A-Za-z]{32}$/);
    // What the keys service issues is what the auth service accepts: one definition of the format.
    expect(k.key).toMatch(API_KEY_PATTERN);
    expect(k.digest).toBe(digestOf(k.key));
    expect(k.digest).not.toContain(k.key.slice(9));
    expect(k.prefix).toBe(k.key.slice(0, 13));
  });
  it("derives expired from expires_at", () => {
    expect(statusOf({ status: "active", expires_at: "2000-01-01T00:00:00.000Z" })).toBe("expired");
    expect(statusOf({ status: "revoked", expires_at: null })).toBe("revoked");
  });
  it("lets org:admin grant anything and others only what they hold", () => {
    expect(checkGrantable({ scopes: ["org:admin"], environment: "live" }, ["org:admin"], "test")).toEqual(["org:admin"]);
    expect(() => checkGrantable({ scopes: ["events:read"], environment: "live" }, ["events:write"], "live")).toThrow(
      expect.objectContaining({ type: "insufficient_scope" }),
    );
  });
});
