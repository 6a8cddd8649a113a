import { isId, newId } from "../../../shared/ids";

describe("ids", () => {
  it("are prefixed, unique and sort by creation time", () => {
    const ids = Array.from({ length: 1000 }, () => newId("evt"));
    expect(new Set(ids).size).toBe(1000);
    expect([...ids].sort()).toEqual(ids);
    expect(ids.every((id) => isId("evt", id))).toBe(true);
    expect(isId("key", ids[0])).toBe(false);
  });
});
