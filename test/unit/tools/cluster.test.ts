import { readable } from "../../../tools/cluster";

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

describe("npm run cluster's log lines", () => {
  it("show a tenant's escape sequences, OSC 52 and bidi overrides escaped, on one line", () => {
    const name = "Acme\u001b[2K\u001b[1A\r\u001b]52;c;ZXZpbA==\u0007\nforged\u202eevil";
    const json = JSON.stringify({ ts: 1000, level: "warn", msg: `webhook ${name} disabled`, mod: "webhooks", url: `https://x/${name}` });
    const line = readable(json);
    expect(CONTROL.test(line)).toBe(false);
    expect(line).toBe(
      "00:00:01.000 WARN  [webhooks] webhook Acme\\x1B[2K\\x1B[1A\\x0D\\x1B]52;c;ZXZpbA==\\x07\\x0Aforged\\u202Eevil disabled url=https://x/Acme\\x1B[2K\\x1B[1A\\x0D\\x1B]52;c;ZXZpbA==\\x07\\x0Aforged\\u202Eevil",
    );
    expect(readable(`plain ${name}`)).toBe("plain Acme\\x1B[2K\\x1B[1A\\x0D\\x1B]52;c;ZXZpbA==\\x07\\x0Aforged\\u202Eevil");
  });
});
