import { requestOf, responseOf } from "../../../../services/webhook-dispatcher/capture";
import { ATTEMPT_RESPONSE_LIMITS } from "../../../../shared/api/wire";

describe("requestOf", () => {
  it("keeps the URL and every header but the signatures, and the body's length", () => {
    const kept = requestOf(
      "https://example.com/hook",
      {
        "content-type": "application/json",
        "webhook-id": "del_1",
        "webhook-timestamp": "1",
        "webhook-signature": "v1,abc",
        "Service-Signature": "sha256=00",
      },
      "héllo",
    );
    expect(kept).toEqual({
      method: "POST",
      url: "https://example.com/hook",
      headers: { "content-type": "application/json", "webhook-id": "del_1", "webhook-timestamp": "1" },
      body_bytes: 6,
    });
  });
});

describe("responseOf", () => {
  it("keeps a short UTF-8 body as text", () => {
    const body = Buffer.from('{"ok":"né"}');
    expect(responseOf({ "Content-Type": "application/json", "set-cookie": ["a=1", "b=2"] }, body, body.length)).toEqual({
      headers: { "content-type": "application/json", "set-cookie": "a=1, b=2" },
      body: '{"ok":"né"}',
      body_encoding: "utf8",
      body_bytes: body.length,
      body_truncated: false,
    });
  });

  it("cuts the body at 4 KiB without splitting a character, and says how long it was", () => {
    // 4095 ASCII bytes, then a 2-byte character the cut splits.
    const whole = Buffer.concat([Buffer.from("a".repeat(4095)), Buffer.from("é"), Buffer.from("tail")]);
    const kept = responseOf({}, whole.subarray(0, 4096), whole.length);
    expect(kept).toMatchObject({ body: "a".repeat(4095), body_encoding: "utf8", body_bytes: whole.length, body_truncated: true });
  });

  it("keeps bytes that are not UTF-8 as base64, marked", () => {
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]);
    expect(responseOf({}, bytes, bytes.length)).toMatchObject({ body: bytes.toString("base64"), body_encoding: "base64" });
    // Valid UTF-8 full of control characters is binary too.
    const nuls = Buffer.from("ab\u0000\u0001cd");
    expect(responseOf({}, nuls, nuls.length)).toMatchObject({ body: nuls.toString("base64"), body_encoding: "base64" });
    const lines = Buffer.from("line 1\r\n\tline 2\n");
    expect(responseOf({}, lines, lines.length)).toMatchObject({ body: "line 1\r\n\tline 2\n", body_encoding: "utf8" });
  });

  it("bounds the headers by count, name and value size, and in all", () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 60; i++) many[`x-h${i}`] = "v";
    const byCount = responseOf(many, Buffer.alloc(0), 0);
    expect(Object.keys(byCount.headers)).toHaveLength(ATTEMPT_RESPONSE_LIMITS.headers);
    expect(byCount.headers_omitted).toBe(60 - ATTEMPT_RESPONSE_LIMITS.headers);

    const big = responseOf({ ["n".repeat(300)]: "v".repeat(2000) }, Buffer.alloc(0), 0);
    expect(big.headers).toEqual({
      ["n".repeat(ATTEMPT_RESPONSE_LIMITS.headerNameChars)]: "v".repeat(ATTEMPT_RESPONSE_LIMITS.headerValueChars),
    });

    const wide: Record<string, string> = {};
    for (let i = 0; i < 20; i++) wide[`x-wide-${i}`] = "w".repeat(500);
    const total = responseOf(wide, Buffer.alloc(0), 0);
    const chars = Object.entries(total.headers).reduce((n, [k, v]) => n + k.length + v.length, 0);
    expect(chars).toBeLessThanOrEqual(ATTEMPT_RESPONSE_LIMITS.headersChars);
    expect(total.headers_omitted).toBeGreaterThan(0);
  });
});
