import { checkPageNumbers } from "../../../shared/pagination";

describe("checkPageNumbers", () => {
  it("takes plain decimal digits only", () => {
    expect(() => checkPageNumbers({ page: "12", per_page: "100", limit: "5" })).not.toThrow();
    for (const [param, value] of [
      ["page", "1e1"],
      ["per_page", "0x10"],
      ["limit", "-1"],
      ["page", ["1", "2"]],
    ] as const) {
      expect(() => checkPageNumbers({ [param]: value })).toThrow(expect.objectContaining({ type: "parameter_invalid", data: { param } }));
    }
  });
});
