import { api, expectError, usePlatform } from "../helpers/platform";

const suite = usePlatform();

const emit = (key: string, body: unknown) => api(suite.p.baseUrl, "POST", "/events", { key, body });

describe("POST /events", () => {
  it("stores a custom event and answers 201 with the contract's fields", async () => {
    const res = await emit(suite.acme.live, { type: "order.created", data: { order_id: "o_1", total: 42 } });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      object: "event",
      id: expect.stringMatching(/^evt_[0-9a-z]{26}$/),
      type: "order.created",
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      data: { order_id: "o_1", total: 42 },
      environment: "live",
      source: "api",
    });
    const again = await api(suite.p.baseUrl, "GET", `/events/${res.body.data.id}`, { key: suite.acme.live });
    expect(again.body.data).toEqual(res.body.data);
  });

  it("takes data as optional, storing an empty object", async () => {
    const res = await emit(suite.acme.live, { type: "user.signed_up" });
    expect(res.status).toBe(201);
    expect(res.body.data.data).toEqual({});
  });

  it.each([["workflow.completed"], ["approval.requested"], ["api_key.revoked"], ["webhook.disabled"], ["workflow.anything_else"]])(
    "refuses the reserved system type %s",
    async (type) => {
      const res = await emit(suite.acme.live, { type, data: {} });
      expectError(res, 400, "parameter_invalid", "type");
      expect(res.body.error.message).toContain("system event type");
    },
  );

  it.each([["Order.Created"], ["order"], ["order..created"], ["order.created!"], [".order"], ["x".repeat(101)]])(
    "refuses the malformed type %s",
    async (type) => {
      expectError(await emit(suite.acme.live, { type, data: {} }), 400, "parameter_invalid", "type");
    },
  );

  it("names what is wrong with the body", async () => {
    expectError(await emit(suite.acme.live, { data: {} }), 400, "parameter_missing", "type");
    expectError(await emit(suite.acme.live, { type: "order.created", data: [1, 2] }), 400, "parameter_invalid", "data");
    expectError(await emit(suite.acme.live, { type: "order.created", data: "text" }), 400, "parameter_invalid", "data");
    expectError(await emit(suite.acme.live, { type: "order.created", data: {}, extra: 1 }), 400, "parameter_unknown", "extra");
  });

  it("refuses data over 64 KiB and stores nothing", async () => {
    const before = (await api(suite.p.baseUrl, "GET", "/events?type=big.payload", { key: suite.acme.live })).body.meta.total;
    const res = await emit(suite.acme.live, { type: "big.payload", data: { blob: "x".repeat(70_000) } });
    expectError(res, 400, "parameter_invalid", "data");
    expect(res.body.error.message).toMatch(/65536/);
    const after = (await api(suite.p.baseUrl, "GET", "/events?type=big.payload", { key: suite.acme.live })).body.meta.total;
    expect(after).toBe(before);
    expect(before).toBe(0);
  });

  it("needs events:write", async () => {
    const reader = (
      await api(suite.p.baseUrl, "POST", "/api-keys", { key: suite.acme.live, body: { name: "reader", scopes: ["events:read"] } })
    ).body.data.key;
    const res = await emit(reader, { type: "order.created", data: {} });
    expectError(res, 403, "insufficient_scope");
    expect(res.body.error.message).toContain("events:write");
    expect((await api(suite.p.baseUrl, "GET", "/events", { key: reader })).status).toBe(200);
  });
});

describe("GET /events", () => {
  it("lists newest first, pages, and filters by type", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await emit(suite.acme.test, { type: "invoice.paid", data: { n: i } })).body.data.id);
    await emit(suite.acme.test, { type: "invoice.voided", data: {} });
    const page1 = await api(suite.p.baseUrl, "GET", "/events?type=invoice.paid&per_page=2", { key: suite.acme.test });
    expect(page1.status).toBe(200);
    expect(page1.body.meta).toEqual({ total: 5, page: 1, per_page: 2 });
    expect(page1.body.data.map((e: any) => e.id)).toEqual([ids[4], ids[3]]);
    const page3 = await api(suite.p.baseUrl, "GET", "/events?type=invoice.paid&per_page=2&page=3", { key: suite.acme.test });
    expect(page3.body.data.map((e: any) => e.id)).toEqual([ids[0]]);
    const all = await api(suite.p.baseUrl, "GET", "/events?per_page=100", { key: suite.acme.test });
    expect(all.body.data.every((e: any) => e.environment === "test")).toBe(true);
    expect(all.body.data[0].type).toBe("invoice.voided");
  });

  it("checks the paging parameters", async () => {
    expectError(await api(suite.p.baseUrl, "GET", "/events?per_page=101", { key: suite.acme.live }), 400, "parameter_invalid", "per_page");
    expectError(await api(suite.p.baseUrl, "GET", "/events?page=0", { key: suite.acme.live }), 400, "parameter_invalid", "page");
  });
});

describe("GET /events/{id}", () => {
  it("answers 404 for another organization's or environment's event", async () => {
    const id = (await emit(suite.acme.live, { type: "order.created", data: {} })).body.data.id;
    expectError(await api(suite.p.baseUrl, "GET", `/events/${id}`, { key: suite.globex.live }), 404, "resource_not_found");
    expectError(await api(suite.p.baseUrl, "GET", `/events/${id}`, { key: suite.acme.test }), 404, "resource_not_found");
    expectError(await api(suite.p.baseUrl, "GET", "/events/evt_nope", { key: suite.acme.live }), 404, "resource_not_found");
  });
});

describe("GET /events/types", () => {
  it("lists the system types with their data, then the custom types this environment emitted", async () => {
    await emit(suite.globex.test, { type: "shipment.sent", data: {} });
    await emit(suite.globex.test, { type: "shipment.sent", data: {} });
    await emit(suite.globex.test, { type: "alpha.first", data: {} });
    const res = await api(suite.p.baseUrl, "GET", "/events/types?per_page=100", { key: suite.globex.test });
    expect(res.status).toBe(200);
    const types = res.body.data.map((t: any) => t.type);
    expect(types).toEqual([
      "workflow.completed",
      "approval.requested",
      "api_key.created",
      "api_key.revoked",
      "webhook.disabled",
      "workflow.chain_limited",
      "approval.decided",
      "workflow.deleted",
      "webhook.deleted",
      "member.role_changed",
      "alpha.first",
      "shipment.sent",
    ]);
    expect(res.body.data[0]).toMatchObject({ system: true, description: expect.stringContaining("run_id") });
    expect(res.body.data[10]).toMatchObject({ system: false, first_seen_at: expect.stringMatching(/Z$/) });
    expect(res.body.meta.total).toBe(12);
    // Another environment has not emitted them.
    const live = await api(suite.p.baseUrl, "GET", "/events/types", { key: suite.globex.live });
    expect(live.body.data.map((t: any) => t.type)).not.toContain("shipment.sent");
  });
});
