import { matchRoute } from "../../../../services/gateway/routes";

const methodsFor = (path: string) => {
  const m = matchRoute("", path);
  return m.route ? [] : m.allowed;
};

describe("routes", () => {
  it("matches a method and path to an action with its path parameters", () => {
    const m = matchRoute("DELETE", "/orgs/org_1/members/mem%5F2");
    expect(m.route?.action).toBe("orgs.removeMember");
    expect(m.route && "params" in m ? m.params : undefined).toEqual({ id: "org_1", member_id: "mem_2" });
    expect(matchRoute("GET", "/api-keys/%E0%A4%A").route).toBeUndefined();
  });
  it("knows which methods a path answers to", () => {
    expect(methodsFor("/api-keys")).toEqual(["POST", "GET"]);
    expect(methodsFor("/api-keys/key_1")).toEqual(["GET", "DELETE"]);
    expect(methodsFor("/nope")).toEqual([]);
  });
});
