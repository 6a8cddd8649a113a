import { api, expectError, usePlatform } from "../helpers/platform";

const suite = usePlatform();

const create = (key: string, body: unknown) => api(suite.p.baseUrl, "POST", "/workflows", { key, body });
/** A public address as a literal, so no DNS is needed to pass the URL rules. */
const PUBLIC = "https://93.184.216.34/hooks";
const valid = (extra: Record<string, unknown> = {}) => ({
  name: "Ship orders",
  trigger: { type: "event", event_type: "order.created" },
  steps: [
    { id: "notify", type: "http", method: "POST", url: PUBLIC, body: { order: "{{input.order.id}}" } },
    { type: "delay", duration_ms: 1000 },
    { id: "ok", type: "approval", message: "Ship {{steps.notify.output.body.ref}}?" },
    { type: "emit", event_type: "order.shipped", data: { ref: "{{steps.notify.output.body.ref}}" } },
  ],
  ...extra,
});

describe("workflows", () => {
  it("creates a workflow with its steps completed by their defaults, and reads it back", async () => {
    const res = await create(suite.acme.live, valid({ description: "When an order comes in" }));
    expect(res.status).toBe(201);
    const wf = res.body.data;
    expect(wf.id).toMatch(/^wf_/);
    expect(wf).toMatchObject({
      name: "Ship orders",
      description: "When an order comes in",
      status: "active",
      environment: "live",
      version: 1,
      trigger: { type: "event", event_type: "order.created" },
    });
    expect(wf.org_id).toBeUndefined();
    expect(wf.steps).toEqual([
      {
        id: "notify",
        type: "http",
        method: "POST",
        url: PUBLIC,
        headers: {},
        body: { order: "{{input.order.id}}" },
        timeout_ms: 10000,
        retries: 0,
      },
      { id: "step_2", type: "delay", duration_ms: 1000 },
      { id: "ok", type: "approval", message: "Ship {{steps.notify.output.body.ref}}?" },
      { id: "step_4", type: "emit", event_type: "order.shipped", data: { ref: "{{steps.notify.output.body.ref}}" } },
    ]);
    expect(wf.created_at).toBe(wf.updated_at);

    const got = await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: suite.acme.live });
    expect(got.status).toBe(200);
    // The same but the signing secret, which the creation alone shows.
    const { signing_secret: secret, ...shown } = wf;
    expect(secret).toMatch(/^whsec_/);
    expect(got.body.data).toEqual(shown);
  });

  it("lists newest first, filtered by status and by triggering event type", async () => {
    const a = (await create(suite.acme.test, valid({ name: "A", trigger: { type: "manual" } }))).body.data;
    const b = (await create(suite.acme.test, valid({ name: "B", status: "inactive" }))).body.data;
    const c = (await create(suite.acme.test, valid({ name: "C", trigger: { type: "event", event_type: "invoice.paid" } }))).body.data;
    const all = await api(suite.p.baseUrl, "GET", "/workflows", { key: suite.acme.test });
    expect(all.status).toBe(200);
    expect(all.body.data.map((w: any) => w.id)).toEqual([c.id, b.id, a.id]);
    expect(all.body.meta).toMatchObject({ total: 3, page: 1, per_page: 20 });
    const inactive = await api(suite.p.baseUrl, "GET", "/workflows?status=inactive", { key: suite.acme.test });
    expect(inactive.body.data.map((w: any) => w.id)).toEqual([b.id]);
    const onInvoice = await api(suite.p.baseUrl, "GET", "/workflows?trigger_event_type=invoice.paid", { key: suite.acme.test });
    expect(onInvoice.body.data.map((w: any) => w.id)).toEqual([c.id]);
    const paged = await api(suite.p.baseUrl, "GET", "/workflows?per_page=2&page=2", { key: suite.acme.test });
    expect(paged.body.data.map((w: any) => w.id)).toEqual([a.id]);
  });

  it("updates: every change adds one to the version; a refused change leaves it as it was", async () => {
    const wf = (await create(suite.acme.live, valid())).body.data;
    const renamed = await api(suite.p.baseUrl, "PATCH", `/workflows/${wf.id}`, {
      key: suite.acme.live,
      body: { name: "Renamed", status: "inactive" },
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ name: "Renamed", status: "inactive", version: 2, steps: wf.steps });
    const resteps = await api(suite.p.baseUrl, "PATCH", `/workflows/${wf.id}`, {
      key: suite.acme.live,
      body: { steps: [{ type: "delay", duration_ms: 5 }], trigger: { type: "manual" }, description: null },
    });
    expect(resteps.body.data).toMatchObject({
      version: 3,
      trigger: { type: "manual" },
      description: null,
      steps: [{ id: "step_1", type: "delay", duration_ms: 5 }],
    });
    expect(resteps.body.data.updated_at >= wf.updated_at).toBe(true);

    const refused = await api(suite.p.baseUrl, "PATCH", `/workflows/${wf.id}`, {
      key: suite.acme.live,
      body: { steps: [{ type: "delay", duration_ms: -1 }] },
    });
    expectError(refused, 400, "parameter_invalid", "steps[0].duration_ms");
    const after = await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: suite.acme.live });
    expect(after.body.data).toEqual(resteps.body.data);
  });

  it("deletes a workflow", async () => {
    const wf = (await create(suite.acme.live, valid())).body.data;
    const del = await api(suite.p.baseUrl, "DELETE", `/workflows/${wf.id}`, { key: suite.acme.live });
    expect(del.status).toBe(200);
    expect(del.body.data.id).toBe(wf.id);
    expectError(await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: suite.acme.live }), 404, "resource_not_found", "id");
    expectError(await api(suite.p.baseUrl, "DELETE", `/workflows/${wf.id}`, { key: suite.acme.live }), 404, "resource_not_found", "id");
  });

  it("keeps organizations and environments apart", async () => {
    const wf = (await create(suite.acme.live, valid())).body.data;
    for (const key of [suite.globex.live, suite.acme.test]) {
      expectError(await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key }), 404, "resource_not_found", "id");
      expectError(
        await api(suite.p.baseUrl, "PATCH", `/workflows/${wf.id}`, { key, body: { name: "mine" } }),
        404,
        "resource_not_found",
        "id",
      );
      expectError(await api(suite.p.baseUrl, "DELETE", `/workflows/${wf.id}`, { key }), 404, "resource_not_found", "id");
      const list = await api(suite.p.baseUrl, "GET", "/workflows?per_page=100", { key });
      expect(list.body.data.map((w: any) => w.id)).not.toContain(wf.id);
    }
    expect((await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key: suite.acme.live })).body.data.name).toBe("Ship orders");
  });

  it("enforces workflows:read and workflows:write", async () => {
    const made = await api(suite.p.baseUrl, "POST", "/api-keys", {
      key: suite.acme.live,
      body: { name: "reader", scopes: ["workflows:read"] },
    });
    const reader = made.body.data.key as string;
    expect((await api(suite.p.baseUrl, "GET", "/workflows", { key: reader })).status).toBe(200);
    expectError(await create(reader, valid()), 403, "insufficient_scope");
    const other = (
      await api(suite.p.baseUrl, "POST", "/api-keys", { key: suite.acme.live, body: { name: "events", scopes: ["events:read"] } })
    ).body.data.key;
    expectError(await api(suite.p.baseUrl, "GET", "/workflows", { key: other }), 403, "insufficient_scope");
  });
});

describe("workflow validation names the step and the field", () => {
  const http = (extra: Record<string, unknown>) => ({ type: "http", url: PUBLIC, ...extra });
  const cases: [string, Record<string, unknown>, string, string][] = [
    ["no steps", { steps: undefined }, "parameter_missing", "steps"],
    ["an empty list", { steps: [] }, "parameter_invalid", "steps"],
    ["51 steps", { steps: Array.from({ length: 51 }, () => ({ type: "delay", duration_ms: 1 })) }, "parameter_invalid", "steps"],
    ["a step that is not an object", { steps: ["http"] }, "parameter_invalid", "steps[0]"],
    ["an unknown type", { steps: [{ type: "sms" }] }, "parameter_invalid", "steps[0].type"],
    ["a field the type lacks", { steps: [{ type: "delay", duration_ms: 5, url: PUBLIC }] }, "parameter_unknown", "steps[0].url"],
    ["a bad id", { steps: [{ id: "Fetch It", type: "delay", duration_ms: 5 }] }, "parameter_invalid", "steps[0].id"],
    [
      "a repeated id",
      {
        steps: [
          { id: "a", type: "delay", duration_ms: 5 },
          { id: "a", type: "delay", duration_ms: 5 },
        ],
      },
      "parameter_invalid",
      "steps[1].id",
    ],
    ["an http step without url", { steps: [{ type: "http" }] }, "parameter_invalid", "steps[0].url"],
    ["a malformed url", { steps: [http({ url: "not a url" })] }, "parameter_invalid", "steps[0].url"],
    [
      "an ftp url",
      { steps: [{ type: "delay", duration_ms: 1 }, http({ url: "ftp://93.184.216.34/x" })] },
      "url_not_allowed",
      "steps[1].url",
    ],
    ["plain http in live", { steps: [http({ url: "http://93.184.216.34/x" })] }, "url_not_allowed", "steps[0].url"],
    ["a private target", { steps: [http({ url: "https://10.1.2.3/x" })] }, "url_not_allowed", "steps[0].url"],
    ["a loopback target", { steps: [http({ url: "https://[::1]/x" })] }, "url_not_allowed", "steps[0].url"],
    ["an unknown method", { steps: [http({ method: "BREW" })] }, "parameter_invalid", "steps[0].method"],
    ["a time-out over a minute", { steps: [http({ timeout_ms: 60_001 })] }, "parameter_invalid", "steps[0].timeout_ms"],
    ["too many retries", { steps: [http({ retries: 11 })] }, "parameter_invalid", "steps[0].retries"],
    ["a bad header name", { steps: [http({ headers: { "x bad": "1" } })] }, "parameter_invalid", 'steps[0].headers["x bad"]'],
    ["a header that is not a string", { steps: [http({ headers: { "x-n": 1 } })] }, "parameter_invalid", "steps[0].headers"],
    ["an oversized body", { steps: [http({ body: { blob: "x".repeat(70_000) } })] }, "parameter_invalid", "steps[0].body"],
    ["a zero delay", { steps: [{ type: "delay", duration_ms: 0 }] }, "parameter_invalid", "steps[0].duration_ms"],
    ["a fractional delay", { steps: [{ type: "delay", duration_ms: 1.5 }] }, "parameter_invalid", "steps[0].duration_ms"],
    ["a long approval message", { steps: [{ type: "approval", message: "m".repeat(1001) }] }, "parameter_invalid", "steps[0].message"],
    ["emitting a system type", { steps: [{ type: "emit", event_type: "workflow.completed" }] }, "parameter_invalid", "steps[0].event_type"],
    ["emitting a malformed type", { steps: [{ type: "emit", event_type: "Order Shipped" }] }, "parameter_invalid", "steps[0].event_type"],
    ["emit data that is a list", { steps: [{ type: "emit", event_type: "a.b", data: [1] }] }, "parameter_invalid", "steps[0].data"],
    [
      "a template of nothing known",
      { steps: [http({ url: "https://93.184.216.34/{{env.secret}}" })] },
      "parameter_invalid",
      "steps[0].url",
    ],
    [
      "a template of a later step",
      { steps: [http({ body: { x: ["{{steps.later.output.id}}"] } }), { id: "later", type: "delay", duration_ms: 1 }] },
      "parameter_invalid",
      "steps[0].body.x[0]",
    ],
    [
      "a template of its own step",
      { steps: [{ id: "me", ...http({ headers: { "x-id": "{{steps.me.output.id}}" } }) }] },
      "parameter_invalid",
      "steps[0].headers.x-id",
    ],
    ["no trigger", { trigger: undefined }, "parameter_missing", "trigger"],
    ["a trigger of another kind", { trigger: { type: "cron" } }, "parameter_invalid", "trigger.type"],
    ["an event trigger without type", { trigger: { type: "event" } }, "parameter_invalid", "trigger.event_type"],
    ["an unknown system type", { trigger: { type: "event", event_type: "workflow.exploded" } }, "parameter_invalid", "trigger.event_type"],
    ["a trigger field too many", { trigger: { type: "manual", every: "1h" } }, "parameter_unknown", "trigger.every"],
    ["no name", { name: undefined }, "parameter_missing", "name"],
    ["a blank name", { name: "   " }, "parameter_invalid", "name"],
    ["an unknown status", { status: "paused" }, "parameter_invalid", "status"],
    ["an unknown field", { schedule: "daily" }, "parameter_unknown", "schedule"],
  ];
  it.each(cases)("refuses %s", async (_what, change, code, param) => {
    const body: Record<string, unknown> = { ...valid(), ...change };
    for (const [k, v] of Object.entries(change)) if (v === undefined) delete body[k];
    const res = await create(suite.acme.live, body);
    expectError(res, 400, code, param);
    expect(res.body.error.message.length).toBeGreaterThan(10);
  });

  it("names the step by its id in the message", async () => {
    const res = await create(suite.acme.live, valid({ steps: [{ id: "fetch", type: "http", url: "https://10.0.0.1/" }] }));
    expect(res.body.error.message).toMatch(/^step 'fetch' \(steps\[0\]\): /);
  });

  it("accepts a workflow that uses everything at its limits", async () => {
    const steps = Array.from({ length: 50 }, (_, i) => ({ id: `s${i}`, type: "delay", duration_ms: 30 * 24 * 60 * 60 * 1000 }));
    const res = await create(suite.acme.live, valid({ steps, name: "n".repeat(200) }));
    expect(res.status).toBe(201);
    expect(res.body.data.steps).toHaveLength(50);
  });
});
