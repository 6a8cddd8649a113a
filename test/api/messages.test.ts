import { api, usePlatform } from "../helpers/platform";

const suite = usePlatform();

/** What a person reads in the dashboard or the CLI when the API refuses: plain English. */
describe("refusals read as English", () => {
  it("counts agree with their nouns: at least 1 item, 1 character", async () => {
    const hook = await api(suite.p.baseUrl, "POST", "/webhooks", {
      key: suite.acme.test,
      body: { url: "https://example.com/h", events: [] },
    });
    expect(hook.status).toBe(400);
    expect(hook.body.error.message).toBe("events must hold at least 1 item; received 0");
    const key = await api(suite.p.baseUrl, "POST", "/api-keys", { key: suite.acme.test, body: { name: "", scopes: ["events:read"] } });
    expect(key.status).toBe(400);
    expect(key.body.error.message).not.toMatch(/\b1 characters\b/);
  });

  it("an approval step, not a approval step", async () => {
    const wf = await api(suite.p.baseUrl, "POST", "/workflows", {
      key: suite.acme.test,
      body: { name: "x", trigger: { type: "manual" }, steps: [{ type: "approval", message: "ok?", url: "https://example.com" }] },
    });
    expect(wf.status).toBe(400);
    expect(wf.body.error.message).toContain("an approval step has no field");
  });

  it("a step field sent as null is refused where the reference does not allow null, and kept where it does", async () => {
    const create = (steps: unknown[]) =>
      api(suite.p.baseUrl, "POST", "/workflows", { key: suite.acme.test, body: { name: "x", trigger: { type: "manual" }, steps } });
    const refused = await create([
      { type: "set", output: 1 },
      { type: "http", url: "{{ input.url }}", retries: null },
    ]);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "parameter_invalid", param: "steps[1].retries" });
    expect(refused.body.error.message).toContain("retries must not be null");
    const kept = await create([
      { type: "approval", message: null },
      { type: "http", url: "{{ input.url }}", body: null },
    ]);
    expect({ status: kept.status, error: kept.body.error }).toEqual({ status: 201, error: undefined });
    const [approval, http] = kept.body.data.steps;
    expect([approval.message, http.body]).toEqual([null, null]);
  });
});
