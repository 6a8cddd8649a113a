import fc from "fast-check";
import { echo } from "../../shared/errors";
import { PAGE_NUMBER_PARAMS } from "../../shared/api/pagination";
import { ROUTES } from "../../services/gateway/routes";
import { api, expectError, usePlatform } from "../helpers/platform";
import { pathOf, routeFields, type RouteField, type Rule } from "../helpers/action-params";

/**
 * What a client is told about a value the API refuses, for whole classes of input through HTTP:
 * every enum parameter with wrong strings, every body field with a value of the wrong type and
 * with null. The routes and their rules come from the actions' own params, so a new field is
 * covered the day it is added.
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "1000000", WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

/** A body each route accepts as far as validation goes: the field under test is then the only fault. */
const VALID: Record<string, Record<string, unknown>> = {
  "POST /orgs/{id}/members": { email: "someone@example.com", role: "developer" },
  "PATCH /orgs/{id}/members/{member_id}": { role: "viewer" },
  "POST /api-keys": { name: "k", scopes: ["events:read"] },
  "POST /events": { type: "order.created" },
  "POST /workflows": { name: "w", trigger: { type: "manual" }, steps: [{ id: "wait", type: "delay", duration_ms: 1 }] },
  "POST /workflows/validate": { name: "w", trigger: { type: "manual" }, steps: [{ id: "wait", type: "delay", duration_ms: 1 }] },
  "POST /webhooks": { url: "http://127.0.0.1:9/hook", events: ["order.shipped"] },
  "POST /webhooks/{id}/recover": { since: "2026-01-01T00:00:00Z" },
  "POST /secrets": { name: "TOKEN", value: "v" },
  "POST /workflows/{id}/schedule/backfill": { from: "2026-01-01T00:00:00Z", to: "2026-01-01T01:00:00Z" },
  "POST /runs/bulk": { action: "cancel", filter: { workflow_id: "wf_01jdx3aaaaaaaaaaaaaaaaaaaa" } },
  "POST /listen/{id}/attempts": { delivery_id: "del_01jdx3aaaaaaaaaaaaaaaaaaaa", event_id: "evt_1", status_code: 200, duration_ms: 1 },
};
const baseOf = (f: RouteField): Record<string, unknown> => VALID[f.name] ?? {};

const send = (f: RouteField, value: unknown) => {
  const path = pathOf(f.route);
  if (f.route.method === "GET") return call("GET", `${path}?${new URLSearchParams({ [f.field]: String(value) })}`);
  return call(f.route.method, path, { ...baseOf(f), [f.field]: value });
};

const isEnum = (rule: Rule) => rule.type === "enum" || rule.items?.type === "enum";
const bodyFields = routeFields().filter((f) => f.route.method !== "GET");

describe("an enum parameter given a value it does not allow", () => {
  const fields = routeFields().filter((f) => isEnum(f.rule));

  it("covers every enum of the public routes, each with a valid base request", () => {
    expect(fields.map((f) => `${f.name} ${f.field}`)).toEqual(
      expect.arrayContaining(["GET /workflows/{id}/runs status", "POST /orgs/{id}/members role", "GET /analytics/usage group_by"]),
    );
    // A body route with a required field needs a valid base, or the first error would be that field's.
    const missing = bodyFields.filter((f) => f.rule.optional !== true && !(f.field in baseOf(f))).map((f) => `${f.name} ${f.field}`);
    expect(missing).toEqual([]);
  });

  it("answers 400 naming the parameter, the value received and every allowed value", async () => {
    for (const f of fields) {
      const allowed = (f.rule.values ?? f.rule.items!.values!) as string[];
      const wrong = fc
        .oneof(fc.string({ maxLength: 200 }), fc.string({ unit: "grapheme", maxLength: 20 }))
        .filter((s) => !allowed.includes(s));
      await fc.assert(
        fc.asyncProperty(wrong, async (value) => {
          const res = await send(f, f.rule.type === "enum" ? value : [value]);
          const param = f.rule.type === "enum" ? f.field : `${f.field}[0]`;
          expectError(res, 400, "parameter_invalid", param);
          const message: string = res.body.error.message;
          expect(message).toContain(`received ${echo(value)}`);
          for (const v of allowed) expect(message).toContain(JSON.stringify(v));
          expect(message.length).toBeLessThan(200 + allowed.join().length * 2);
        }),
        { numRuns: 15 },
      );
    }
  }, 60_000);

  it("names the value and the allowed ones for the enums checked in the logic too (scopes, step types, methods, trigger types)", async () => {
    const scope = await call("POST", "/api-keys", { name: "k", scopes: ["events:read", "events:destroy"] });
    expectError(scope, 400, "parameter_invalid", "scopes[1]");
    expect(scope.body.error.message).toMatch(/received "events:destroy"/);
    expect(scope.body.error.message).toContain('"workflows:write"');
    const base = VALID["POST /workflows"];
    const step = await call("POST", "/workflows", { ...base, steps: [{ id: "a", type: "sleep" }] });
    expectError(step, 400, "parameter_invalid", "steps[0].type");
    expect(step.body.error.message).toMatch(
      /must be one of "http", "delay", "approval", "emit", "stop", "set"(, "[a-z_]+")*; received "sleep"/,
    );
    const method = await call("POST", "/workflows", {
      ...base,
      steps: [{ id: "a", type: "http", url: "https://example.com", method: "FETCH" }],
    });
    expectError(method, 400, "parameter_invalid", "steps[0].method");
    expect(method.body.error.message).toMatch(/"GET".*; received "FETCH"/);
    const trigger = await call("POST", "/workflows", { ...base, trigger: { type: 7 } });
    expectError(trigger, 400, "parameter_invalid", "trigger.type");
    expect(trigger.body.error.message).toBe('trigger.type must be one of "manual", "event", "schedule", "webhook"; received 7');
  });
});

/** A JSON value of another type than the rule's, that no conversion reads as one. */
function wrongFor(rule: Rule): fc.Arbitrary<unknown> | undefined {
  const object = fc.dictionary(fc.string({ minLength: 1, maxLength: 5 }), fc.integer(), { minKeys: 1, maxKeys: 3 });
  switch (rule.type) {
    case "string":
    case "email":
    case "url":
    case "enum":
      return fc.oneof(fc.integer(), fc.boolean(), object, fc.array(fc.integer(), { maxLength: 3 }));
    case "number":
      return fc.oneof(
        fc.string({ minLength: 1, maxLength: 30 }).filter((s) => Number.isNaN(Number(s))),
        object,
      );
    case "boolean":
      return fc.oneof(
        fc.integer({ min: 2 }),
        object,
        fc.string({ minLength: 2, maxLength: 10 }).filter((s) => !["true", "false", "on", "off"].includes(s)),
      );
    case "array":
      return fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), object);
    case "object":
      return fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.array(fc.integer(), { maxLength: 3 }));
    default:
      return undefined;
  }
}

describe("a body field of the wrong type", () => {
  it("answers 400 naming the field, the type it needs and the value received", async () => {
    const tried: string[] = [];
    for (const f of bodyFields) {
      const wrong = wrongFor(f.rule);
      if (!wrong) continue;
      tried.push(`${f.name} ${f.field}`);
      await fc.assert(
        fc.asyncProperty(wrong, async (value) => {
          const res = await send(f, value);
          expectError(res, 400, "parameter_invalid", f.field);
          expect(res.body.error.message).toContain(`${f.field} must be`);
          expect(res.body.error.message).toContain(`received ${echo(value)}`);
        }),
        { numRuns: 8 },
      );
    }
    expect(tried).toEqual(expect.arrayContaining(["POST /webhooks url", "POST /events data", "POST /api-keys scopes"]));
  }, 60_000);

  it("answers 400 naming a list's number parameter and the text received, on every list", async () => {
    const lists = ROUTES.filter((r) => r.list);
    const notDigits = fc.string({ minLength: 1, maxLength: 12 }).filter((v) => !/^[0-9]+$/.test(v));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...lists), fc.constantFrom(...PAGE_NUMBER_PARAMS), notDigits, async (route, name, value) => {
        const res = await call("GET", `${pathOf(route)}?${new URLSearchParams({ [name]: value })}`);
        expectError(res, 400, "parameter_invalid", name);
        expect(res.body.error.message).toContain(`received ${echo(value)}`);
      }),
      { numRuns: 40 },
    );
  });

  it("echoes a long value cut short, as JSON", async () => {
    const res = await call("POST", "/events", { type: "order.created", data: `${"\n".repeat(10)}${"x".repeat(500)}` });
    expectError(res, 400, "parameter_invalid", "data");
    expect(res.body.error.message).toBe(`data must be an object; received "${"\\n".repeat(10)}${"x".repeat(59)}…`);
  });
});

describe("null in a body", () => {
  it("is refused, naming the field, wherever the field is not nullable; taken as a value where it is", async () => {
    const nullable: string[] = [];
    for (const f of bodyFields) {
      const res = await send(f, null);
      if (f.rule.nullable === true) {
        nullable.push(`${f.name} ${f.field}`);
        expect({ field: f.field, param: res.body.error?.param }).not.toEqual({ field: f.field, param: f.field });
        continue;
      }
      expectError(res, 400, "parameter_invalid", f.field);
      expect(res.body.error.message).toBe(`${f.field} cannot be null; leave it out instead`);
    }
    // The fields a resource answers as null may be sent as null.
    expect(nullable).toEqual(
      expect.arrayContaining(["POST /workflows description", "PATCH /webhooks/{id} rate_limit", "POST /listen/{id}/attempts status_code"]),
    );
  }, 60_000);

  it("in a create means nothing stored for a nullable field, and refuses the create for another", async () => {
    const wf = await call("POST", "/workflows", { ...VALID["POST /workflows"], description: null });
    expect(wf.status).toBe(201);
    expect(wf.body.data.description).toBeNull();
    const count = async () => (await call("GET", "/events?type=order.created&limit=1")).body.meta.total;
    const before = await count();
    expectError(await call("POST", "/events", { type: "order.created", data: null }), 400, "parameter_invalid", "data");
    expect(await count()).toBe(before);
  });
});

describe("Idempotency-Key compares the parsed body", () => {
  const withKey = (key: string, raw: string) =>
    api(suite.p.baseUrl, "POST", "/events", {
      key: suite.acme.live,
      raw,
      headers: { "content-type": "application/json", "idempotency-key": key },
    });

  it("replays a body with its keys reordered, spaced or nested differently, and refuses another value", async () => {
    const entries = fc.uniqueArray(
      fc.tuple(fc.string({ minLength: 1, maxLength: 6 }), fc.oneof(fc.integer(), fc.string({ maxLength: 6 }), fc.boolean())),
      {
        minLength: 2,
        maxLength: 6,
        selector: ([k]) => k,
      },
    );
    let n = 0;
    await fc.assert(
      fc.asyncProperty(entries, async (pairs) => {
        const key = `reorder-${(n += 1)}-${Date.now()}`;
        const data = Object.fromEntries(pairs.filter(([k]) => k !== "__proto__"));
        const first = await withKey(key, JSON.stringify({ type: "order.created", data }));
        expect(first.status).toBe(201);
        const reordered = Object.fromEntries([...Object.entries(data)].reverse());
        const replay = await withKey(key, JSON.stringify({ data: reordered, type: "order.created" }, null, 2));
        expect({ status: replay.status, replayed: replay.headers["idempotent-replayed"], id: replay.body.data.id }).toEqual({
          status: 201,
          replayed: "true",
          id: first.body.data.id,
        });
        const other = await withKey(key, JSON.stringify({ type: "order.created", data: { ...data, extra: 1 } }));
        expectError(other, 409, "idempotency_key_reused");
      }),
      { numRuns: 15 },
    );
  });
});
