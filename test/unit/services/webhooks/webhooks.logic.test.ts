import { checkSubscription, checkTestData, targetOf, type WebhookDoc } from "../../../../services/webhooks/webhooks.logic";
import { TEST_DATA_MAX_BYTES } from "../../../../services/webhooks/webhooks.params";

describe("webhook subscriptions", () => {
  it("takes '*' alone, custom names, and known system types", () => {
    expect(checkSubscription(["*"])).toEqual(["*"]);
    expect(checkSubscription(["order.created", "api_key.revoked", "order.created"])).toEqual(["order.created", "api_key.revoked"]);
    expect(() => checkSubscription(["*", "a.b"])).toThrow(/cannot be combined/);
    expect(() => checkSubscription(["workflow.started"])).toThrow(/Unknown event type/);
    expect(() => checkSubscription(["ORDER"])).toThrow(/not an event type/);
  });

  it("signs with the current secret first and drops rotated secrets once expired", () => {
    const doc = {
      secret: "whsec_new",
      previous_secrets: [
        { secret: "whsec_recent", expires_at: "2026-11-23T00:00:00.000Z" },
        { secret: "whsec_old", expires_at: "2026-11-21T00:00:00.000Z" },
      ],
    } as unknown as WebhookDoc;
    expect(targetOf(doc, Date.parse("2026-11-22T12:00:00.000Z")).secrets).toEqual(["whsec_new", "whsec_recent"]);
  });
});

describe("a test event's own data", () => {
  // `{"s":""}` is 8 bytes as JSON around the string; a multi-byte character counts its UTF-8 bytes.
  const sized = (bytes: number, char = "x") => ({ s: char.repeat((bytes - 8) / Buffer.byteLength(char)) });
  it("passes up to the limit, in UTF-8 bytes of its JSON, and refuses one byte more naming data", () => {
    expect(checkTestData(sized(TEST_DATA_MAX_BYTES))).toEqual(sized(TEST_DATA_MAX_BYTES));
    expect(() => checkTestData(sized(TEST_DATA_MAX_BYTES + 1))).toThrow(
      expect.objectContaining({ type: "parameter_invalid", data: { param: "data" } }),
    );
    expect(() => checkTestData(sized(TEST_DATA_MAX_BYTES + 2, "é"))).toThrow(/limit is 65536/);
  });
});
