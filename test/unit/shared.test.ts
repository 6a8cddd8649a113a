import { checkGrantable, generateKey, statusOf } from "../../services/keys/keys.logic";
import { API_KEY_PATTERN, digestOf } from "../../shared/identity";
import { loadSettings } from "../../shared/config";
import { isId, newId } from "../../shared/ids";
import { resolveVersion } from "../../shared/versions";

describe("ids", () => {
  it("are prefixed, unique and sort by creation time", () => {
    const ids = Array.from({ length: 1000 }, () => newId("evt"));
    expect(new Set(ids).size).toBe(1000);
    expect([...ids].sort()).toEqual(ids);
    expect(ids.every((id) => isId("evt", id))).toBe(true);
    expect(isId("key", ids[0])).toBe(false);
  });
});

describe("resolveVersion", () => {
  it("uses the pinned version without a header and the latest on or before a date", () => {
    expect(resolveVersion(undefined, "2026-11-01")).toBe("2026-11-01");
    expect(resolveVersion("2026-11-01", undefined)).toBe("2026-11-01");
    expect(resolveVersion("2030-01-01", undefined)).toBe("2026-11-01");
  });
  it("rejects malformed and too-early dates", () => {
    expect(() => resolveVersion("2026-02-31", undefined)).toThrow(expect.objectContaining({ type: "invalid_version" }));
    expect(() => resolveVersion("2026-10-31", undefined)).toThrow(expect.objectContaining({ type: "unsupported_version" }));
  });
});

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

describe("loadSettings", () => {
  it("has the contract's defaults", () => {
    const s = loadSettings({});
    expect(s).toMatchObject({ port: 3000, transporter: undefined, mongoUrl: undefined, dataDir: "./data", webhookTimeoutMs: 10000 });
    expect(s.webhookRetryDelaysMs).toEqual([90000, 360000, 1440000, 5760000]);
    expect(s.services).toContain("gateway");
  });
  it("names the setting that is wrong", () => {
    expect(() => loadSettings({ PORT: "http" })).toThrow(/PORT/);
    expect(() => loadSettings({ SERVICES: "gateway,nope" })).toThrow(/SERVICES.*nope/);
    expect(() => loadSettings({ TRANSPORTER: "redis://x" })).toThrow(/TRANSPORTER/);
    expect(() => loadSettings({ WEBHOOK_RETRY_DELAYS_MS: "1,2" })).toThrow(/WEBHOOK_RETRY_DELAYS_MS/);
    expect(() => loadSettings({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "yes" })).toThrow(/WEBHOOK_ALLOW_PRIVATE_TARGETS/);
  });
});
