import { api, expectError, usePlatform } from "../helpers/platform";

/**
 * Input rules a client meets at the gateway, through HTTP: numbers a store cannot hold exactly,
 * times before 1970 in every time filter, and lists paged two ways at once.
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "1000000", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });

const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });
const raw = (method: string, path: string, text: string) =>
  api(suite.p.baseUrl, method, path, { key: suite.acme.live, raw: text, headers: { "content-type": "application/json" } });

describe("numbers", () => {
  it("refuses a number the store would change, naming where it is", async () => {
    for (const n of ["1e400", "-1e400", "9007199254740993", "1e-400", "-0", "-0.0"]) {
      const res = await raw("POST", "/events", `{"type":"n.odd","data":{"list":[1,{"n":${n}}]}}`);
      expectError(res, 400, "parameter_invalid", "data.list[1].n");
      expect(res.body.error.message).toMatch(/cannot hold exactly/);
    }
    expectError(
      await raw("POST", "/api-keys", `{"name":"k","scopes":["events:read"],"expires_in_days":-0}`),
      400,
      "parameter_invalid",
      "expires_in_days",
    );
  });

  it("keeps numbers a double holds exactly as they were sent", async () => {
    const res = await raw(
      "POST",
      "/events",
      `{"type":"n.even","data":{"a":9007199254740992,"b":9007199254740994,"c":1e21,"d":0.1,"e":-1.5e-7,"f":0}}`,
    );
    expect(res.status).toBe(201);
    const stored = (await call("GET", `/events/${res.body.data.id}`)).body.data.data;
    expect(stored).toEqual({ a: 9007199254740992, b: 9007199254740994, c: 1e21, d: 0.1, e: -1.5e-7, f: 0 });
  });
});

describe("times before 1970", () => {
  let webhook: string;
  beforeAll(async () => {
    webhook = (await call("POST", "/webhooks", { url: "http://127.0.0.1:9/hook", events: ["t.old"] })).body.data.id;
    const workflow = (
      await call("POST", "/workflows", {
        name: "old",
        trigger: { type: "manual" },
        steps: [{ id: "ok", type: "approval", message: "go?" }],
      })
    ).body.data.id;
    await call("POST", `/workflows/${workflow}/runs`, {});
    await call("POST", "/events", { type: "t.old", data: {} });
  });

  it("answers every time filter: from before 1970 is from the start, before a time before 1970 is nothing", async () => {
    const lists = ["/runs", "/audit-log", `/webhooks/${webhook}/deliveries`];
    for (const list of lists) {
      const all = await call("GET", list);
      expect(all.status).toBe(200);
      const from = await call("GET", `${list}?created_after=1969-12-31T23:59:59Z`);
      expect({ list, status: from.status, total: from.body.meta?.total }).toEqual({ list, status: 200, total: all.body.meta.total });
      const before = await call("GET", `${list}?created_after=1900-01-01T00:00:00Z&created_before=1960-06-01T00:00:00Z`);
      expect({ list, status: before.status, total: before.body.meta?.total }).toEqual({ list, status: 200, total: 0 });
    }
  });

  it("recovers a webhook's deliveries since a time before 1970", async () => {
    const res = await call("POST", `/webhooks/${webhook}/recover`, { since: "1960-01-01T00:00:00Z" });
    expect(res.status).toBe(202);
    expect(res.body.data.since).toBe("1960-01-01T00:00:00.000Z");
  });
});

describe("paging", () => {
  beforeAll(async () => {
    for (let i = 0; i < 4; i++) await call("POST", "/events", { type: "p.mode", data: { i } });
  });

  it("refuses a list paged by number and by cursor at once, naming the by-number parameter", async () => {
    const last = (await call("GET", "/events?limit=1")).body.data[0].id;
    expectError(await call("GET", `/events?per_page=3&starting_after=${last}`), 400, "parameter_invalid", "per_page");
    expectError(await call("GET", "/events?page=1&per_page=2&limit=2"), 400, "parameter_invalid", "page");
    expectError(await call("GET", `/events?page=1&ending_before=${last}`), 400, "parameter_invalid", "page");
    const res = await call("GET", "/events?per_page=2&limit=2");
    expectError(res, 400, "parameter_invalid", "per_page");
    expect(res.body.error.message).toMatch(/either by number .* or by cursor/);
  });

  it("takes either way alone", async () => {
    expect((await call("GET", "/events?page=2&per_page=2")).body.meta).toMatchObject({ page: 2, per_page: 2 });
    expect((await call("GET", "/events?limit=2")).body.meta).toMatchObject({ limit: 2, has_more: true });
  });
});
