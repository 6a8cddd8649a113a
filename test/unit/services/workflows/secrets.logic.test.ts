import { randomBytes } from "node:crypto";
import { open, seal, SecretUnavailable, secretNames } from "../../../../services/workflows/secrets.logic";
import type { Step } from "../../../../services/workflows/workflows.logic";

const key = (id: string) => ({ id, key: randomBytes(32).toString("base64") });
const owner = { org_id: "org_1", environment: "live" as const, name: "TOKEN" };

describe("sealing secrets (AES-256-GCM)", () => {
  const k1 = key("k1");
  const k2 = key("k2");

  it("opens what it sealed, under the current key, with a fresh nonce each time", () => {
    const a = seal([k1, k2], owner, "hunter2 ✓");
    const b = seal([k1, k2], owner, "hunter2 ✓");
    expect(a.key_id).toBe("k1");
    expect(a.iv).not.toBe(b.iv);
    expect(a.value).not.toBe(b.value);
    expect(Buffer.from(a.value, "base64").toString("utf8")).not.toContain("hunter2");
    expect(open([k1, k2], { ...owner, ...a })).toBe("hunter2 ✓");
    // During a rotation the old key still opens it, wherever it is in the list.
    expect(open([k2, k1], { ...owner, ...a })).toBe("hunter2 ✓");
  });

  it("refuses a key id the keys no longer hold, naming it", () => {
    const sealed = seal([k1], owner, "v");
    expect(() => open([k2], { ...owner, ...sealed })).toThrow(SecretUnavailable);
    expect(() => open([k2], { ...owner, ...sealed })).toThrow("encrypted under key 'k1', which SECRETS_KEYS no longer holds (held: k2)");
  });

  it("refuses the right id with other key bytes", () => {
    const sealed = seal([k1], owner, "v");
    expect(() => open([{ id: "k1", key: key("x").key }], { ...owner, ...sealed })).toThrow(/does not decrypt under key 'k1'/);
  });

  it("refuses a tampered ciphertext, tag or nonce", () => {
    const sealed = seal([k1], owner, "a longer value to flip");
    const flip = (b64: string) => {
      const bytes = Buffer.from(b64, "base64");
      bytes[0] ^= 1;
      return bytes.toString("base64");
    };
    for (const field of ["value", "tag", "iv"] as const)
      expect(() => open([k1], { ...owner, ...sealed, [field]: flip(sealed[field]) })).toThrow(SecretUnavailable);
  });

  it("binds the value to its organization, environment and name: copied onto another secret, it does not open", () => {
    const sealed = seal([k1], owner, "v");
    for (const other of [{ org_id: "org_2" }, { environment: "test" as const }, { name: "OTHER" }])
      expect(() => open([k1], { ...owner, ...other, ...sealed })).toThrow(/does not decrypt/);
  });
});

describe("secretNames", () => {
  it("lists the secrets an http step's url, headers and body use, once each; other steps use none", () => {
    const http: Step = {
      id: "a",
      type: "http",
      method: "POST",
      url: "https://x.test/{{secrets.A}}",
      headers: { authorization: "Bearer {{ secrets.B }}" },
      body: { a: "{{secrets.A}}", n: "{{input.secrets.C}}" },
      timeout_ms: 1000,
      retries: 0,
    };
    expect(secretNames(http)).toEqual(["A", "B"]);
    expect(secretNames({ id: "d", type: "delay", duration_ms: 1 })).toEqual([]);
    expect(secretNames(undefined)).toEqual([]);
  });
});
