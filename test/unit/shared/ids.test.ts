import { idFloorAt, isId, newId, timeOfId } from "../../../shared/ids";

describe("ids", () => {
  it("are prefixed, unique and sort by creation time", () => {
    const ids = Array.from({ length: 1000 }, () => newId("evt"));
    expect(new Set(ids).size).toBe(1000);
    expect([...ids].sort()).toEqual(ids);
    expect(ids.every((id) => isId("evt", id))).toBe(true);
    expect(isId("key", ids[0])).toBe(false);
  });
});

describe("timeOfId", () => {
  it("answers the time an id was made at, which idFloorAt bounds", () => {
    const before = Date.now();
    const id = newId("aud");
    const at = timeOfId(id);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(idFloorAt("aud", at) <= id).toBe(true);
    expect(idFloorAt("aud", at + 1) > id).toBe(true);
  });
});
