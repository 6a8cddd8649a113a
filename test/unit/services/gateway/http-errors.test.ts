import { toHttpError } from "../../../../services/gateway/http-errors";
import { ApiError } from "../../../../shared/errors";

describe("toHttpError", () => {
  it("maps errors by their type, also as plain objects after a NATS hop", () => {
    expect(toHttpError(new ApiError("insufficient_scope", "x"))).toMatchObject({ status: 403, code: "insufficient_scope" });
    expect(toHttpError({ name: "ApiError", type: "resource_not_found", code: 404, message: "m", data: { param: "id" } })).toMatchObject({
      status: 404,
      param: "id",
    });
    expect(toHttpError({ name: "ValidationError", data: [{ type: "required", field: "name" }] })).toMatchObject({
      status: 400,
      code: "parameter_missing",
      param: "name",
    });
    expect(toHttpError({ name: "ServiceNotFoundError" })).toMatchObject({ status: 503, retryAfter: 1 });
  });
  it("names the first unknown parameter of a strict object by its path, and at most three in the message", () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`).join(", ");
    const res = toHttpError({ name: "ValidationError", data: [{ type: "objectStrict", field: "steps[0]", actual: keys }] });
    expect(res).toMatchObject({ status: 400, code: "parameter_unknown", param: "steps[0].k0" });
    expect(res.message).toBe("Received unknown parameters: k0, k1, k2 and 997 more");
    expect(toHttpError({ name: "ValidationError", data: [{ type: "objectStrict", actual: "x" }] }).message).toBe(
      "Received unknown parameter: x",
    );
    // Named by its path inside the object, in the project's notation.
    const nested = toHttpError({ name: "ValidationError", data: [{ type: "objectStrict", field: "filter", actual: "$where, a b" }] });
    expect(nested).toMatchObject({ code: "parameter_unknown", param: 'filter["$where"]' });
  });
  it("hides anything unknown behind a 500 that leaks nothing", () => {
    const res = toHttpError(new Error("secret connection string mongodb://u:p@h"));
    expect(res).toMatchObject({ status: 500, code: "internal_error" });
    expect(res.message).not.toContain("mongodb");
  });
  it("words each rule kind with the field, the rule and the value received (as JSON, cut short)", () => {
    const message = (failure: object) => toHttpError({ name: "ValidationError", data: [failure] }).message;
    expect(message({ type: "enumValue", field: "status", expected: "queued, running", actual: "done" })).toBe(
      'status must be one of "queued", "running"; received "done"',
    );
    expect(message({ type: "number", field: "limit", actual: "ten" })).toBe('limit must be a number; received "ten"');
    expect(message({ type: "boolean", field: "ok", actual: 1 })).toBe("ok must be a boolean (true or false); received 1");
    expect(message({ type: "array", field: "events", actual: "*" })).toBe('events must be an array; received "*"');
    expect(message({ type: "object", field: "data", actual: [1] })).toBe("data must be an object; received [1]");
    expect(message({ type: "email", field: "email", actual: "a@" })).toBe('email must be a valid e-mail address; received "a@"');
    expect(message({ type: "stringPattern", field: "id", expected: "/^a$/", actual: "b" })).toBe(
      'id must match the pattern /^a$/; received "b"',
    );
    expect(message({ type: "stringMax", field: "name", expected: 3, actual: 5 })).toBe(
      "name must be at most 3 characters long; received 5",
    );
    expect(message({ type: "string", field: "name", actual: "x".repeat(200) })).toBe(`name must be a string; received "${"x".repeat(79)}…`);
    expect(toHttpError({ name: "ValidationError", data: [{ type: "required", field: "name", actual: null }] })).toMatchObject({
      code: "parameter_invalid",
      message: "name cannot be null; leave it out instead",
    });
  });
});
