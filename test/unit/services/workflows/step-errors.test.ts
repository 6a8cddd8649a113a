import { notAnswered, quotedTemplate, urlRefused } from "../../../../services/workflows/step-errors";
import { redact } from "../../../../services/workflows/outputs";

const TEMPLATE = "https://{{secrets.HOST}}.example.com/{{secrets.PATH}}";

describe("step errors", () => {
  it("quote the URL template for every refusal of the target rules, never the rule's own words", () => {
    const filled = "https://s3cr3tvalue.example.com/an0thersecret";
    for (const message of [
      `'${filled}' is not an absolute URL`,
      "webhook URLs must use https (got s3cr3tvalue)",
      "url must not carry a user name or password",
      `the host '${filled}' does not resolve`,
      "the host resolves to a private address",
      `something new about ${filled}`,
    ]) {
      const error = urlRefused(TEMPLATE, message);
      expect(error.startsWith(`url ${quotedTemplate(TEMPLATE)}: `)).toBe(true);
      expect(error).not.toContain("s3cr3t");
      expect(error).not.toContain("an0ther");
    }
  });

  it("keep the connection's failures that quote nothing, and reduce the others to their code", () => {
    expect(notAnswered(TEMPLATE, "no answer within 150 ms")).toBe("no answer within 150 ms");
    expect(notAnswered(TEMPLATE, "connection refused")).toBe("connection refused");
    expect(notAnswered(TEMPLATE, "target address not allowed: s3cr3t.internal resolves to a private address")).toBe(
      `url ${quotedTemplate(TEMPLATE)}: the host is or resolves to a private address`,
    );
    expect(notAnswered(TEMPLATE, "UND_ERR_INVALID_ARG: invalid header value s3cr3t")).toBe(
      `url ${quotedTemplate(TEMPLATE)}: the request failed (UND_ERR_INVALID_ARG)`,
    );
    expect(notAnswered(TEMPLATE, "s3cr3t went wrong")).toBe(`url ${quotedTemplate(TEMPLATE)}: the request failed`);
  });

  it("cut a long template", () => {
    expect(quotedTemplate("x".repeat(500))).toBe(`'${"x".repeat(200)}…'`);
  });
});

describe("redact", () => {
  it("finds a value in any letter case (a host name comes back lower-cased)", () => {
    expect(redact({ host: "ABCdefGH.example.com" }, { HOST: "AbCDeFgh" })).toEqual({ host: "[redacted:HOST].example.com" });
    expect(redact("a.b*(c) A.B*(C)", { RE: "a.b*(c)" })).toBe("[redacted:RE] [redacted:RE]");
  });
});
