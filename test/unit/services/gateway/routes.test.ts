import { matchRoute, ROUTES } from "../../../../services/gateway/routes";

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

describe("the audit log's coverage", () => {
  it("every mutation says how it is recorded, or is excluded on purpose (the data plane)", () => {
    const mutations = ROUTES.filter((r) => r.method !== "GET");
    expect(mutations.filter((r) => r.audit === undefined).map((r) => `${r.method} ${r.path}`)).toEqual([]);
    expect(mutations.filter((r) => r.audit === false).map((r) => `${r.method} ${r.path}`)).toEqual([
      "POST /events",
      "POST /workflows/validate",
      "POST /hooks/{hook_id}",
      "POST /workflows/{id}/runs",
      "POST /listen/{id}/attempts",
    ]);
    expect(ROUTES.filter((r) => r.method === "GET" && r.audit !== undefined)).toEqual([]);
  });
  it("action names are `<resource>.<verb>`, one per route", () => {
    const actions = ROUTES.flatMap((r) => (r.audit ? [r.audit.action] : []));
    expect(new Set(actions).size).toBe(actions.length);
    for (const action of actions) expect(action).toMatch(/^[a-z_]+\.[a-z_]+$/);
  });
});
