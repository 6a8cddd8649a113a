import { countsAgainstNode } from "../../moleculer.config";
import { ApiError } from "../../shared/errors";

describe("the circuit breaker's check", () => {
  it("counts a node's own failures, not the shared store's or another service's", () => {
    expect(countsAgainstNode(new ApiError("internal_error", "x"))).toBe(true);
    expect(countsAgainstNode({ name: "RequestTimeoutError", code: 504 })).toBe(true);
    expect(countsAgainstNode(new ApiError("storage_unavailable", "x"))).toBe(false);
    expect(countsAgainstNode({ type: "service_unavailable", code: 503 })).toBe(false);
    expect(countsAgainstNode(new ApiError("parameter_invalid", "x"))).toBe(false);
  });
});
