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
  it("hides anything unknown behind a 500 that leaks nothing", () => {
    const res = toHttpError(new Error("secret connection string mongodb://u:p@h"));
    expect(res).toMatchObject({ status: 500, code: "internal_error" });
    expect(res.message).not.toContain("mongodb");
  });
});
