import { Webhook } from "standardwebhooks";
import { LISTENER_EVENT, isListened } from "../../shared/records/listeners";
import { waitFor } from "../../tools/procs";
import { api, expectError, startPlatform, type Platform, type TestOrg } from "../helpers/platform";

/**
 * GET /v1/listen (the stream the CLI's `listen` reads) and the listener's part of the delivery
 * log, through the gateway over HTTP.
 */
let p: Platform;
let acme: TestOrg;
let globex: TestOrg;

beforeAll(async () => {
  p = await startPlatform();
  acme = await p.createOrg("Acme");
  globex = await p.createOrg("Globex");
});
afterAll(() => p?.stop());

interface Sse {
  event: string;
  data: any;
}
/** A stream read as it comes: `next()` is its next event. */
async function listen(key: string, query = "") {
  const stop = new AbortController();
  const res = await fetch(`${p.baseUrl}/listen${query}`, { headers: { authorization: `Bearer ${key}` }, signal: stop.signal });
  const events: Sse[] = [];
  let ended = false;
  const reading = (async () => {
    let buffer = "";
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      }
    } catch {
      // aborted
    }
    ended = true;
  })();
  await waitFor("the session event", () => events.length > 0, 5_000);
  const session = events[0].data;
  return {
    res,
    session,
    events,
    ended: () => ended,
    deliveries: () => events.filter((e) => e.event === "delivery").map((e) => e.data),
    async close() {
      stop.abort();
      await reading;
    },
  };
}

const emit = async (key: string, type: string, data: Record<string, unknown> = {}) => {
  const res = await api(p.baseUrl, "POST", "/events", { key, body: { type, data } });
  expect(res.status).toBe(201);
  return res.body.data;
};

describe("GET /v1/listen", () => {
  it("streams the key's environment's events of the asked types, signed with the session's secret", async () => {
    const s = await listen(acme.test, "?events=order.*,invoice.paid");
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(s.res.headers.get("request-id")).toMatch(/^req_/);
    expect(s.session).toMatchObject({ org_id: acme.org.id, environment: "test", events: ["order.*", "invoice.paid"] });
    expect(s.session.id).toMatch(/^ls_[0-9a-z]{26}$/);

    await emit(acme.live, "order.created"); // the other environment
    await emit(globex.test, "order.created"); // another organization
    await emit(acme.test, "user.created"); // not asked for
    const wanted = [await emit(acme.test, "order.created", { n: 1 }), await emit(acme.test, "invoice.paid", { n: 2 })];
    await waitFor("two deliveries", () => s.deliveries().length >= 2);
    const got = s.deliveries();
    expect(got.map((d) => d.event_id)).toEqual(wanted.map((e) => e.id));
    for (const d of got) {
      expect(() => new Webhook(s.session.secret).verify(d.body, d.headers)).not.toThrow();
      expect(d.headers["webhook-id"]).toBe(d.id);
      expect(JSON.parse(d.body)).toMatchObject({ id: d.event_id, type: d.event_type });
    }
    await s.close();
  });

  it("refuses without a key, without webhooks:write, and with event types that are not types", async () => {
    expectError(await api(p.baseUrl, "GET", "/listen"), 401, "missing_api_key");
    const readOnly = await api(p.baseUrl, "POST", "/api-keys", { key: acme.test, body: { name: "ro", scopes: ["webhooks:read"] } });
    expectError(await api(p.baseUrl, "GET", "/listen", { key: readOnly.body.data.key }), 403, "insufficient_scope");
    expectError(await api(p.baseUrl, "GET", "/listen?events=Order%20Created", { key: acme.test }), 400, "parameter_invalid", "events");
    expectError(await api(p.baseUrl, "GET", "/listen?other=1", { key: acme.test }), 400, "parameter_unknown", "other");
  });

  it("ends a stream when its key is revoked", async () => {
    const made = await api(p.baseUrl, "POST", "/api-keys", { key: globex.live, body: { name: "listener", scopes: ["webhooks:write"] } });
    const s = await listen(made.body.data.key);
    expect((await api(p.baseUrl, "DELETE", `/api-keys/${made.body.data.id}`, { key: globex.live })).status).toBe(200);
    await waitFor("the stream to end", () => s.ended(), 5_000);
    expect(s.events.at(-1)).toEqual({ event: "closing", data: { reason: "the API key was revoked" } });
    await s.close();
  });

  it("holds at most 10 streams of one environment on a gateway (400 quota_exceeded)", async () => {
    const streams = [];
    for (let i = 0; i < 10; i++) streams.push(await listen(globex.test));
    expectError(await api(p.baseUrl, "GET", "/listen", { key: globex.test }), 400, "quota_exceeded");
    await streams.pop()!.close();
    await waitFor("a stream's place freed", async () => {
      const res = await fetch(`${p.baseUrl}/listen`, { headers: { authorization: `Bearer ${globex.test}` } });
      await res.body?.cancel();
      return res.status === 200;
    });
    for (const s of streams) await s.close();
  });

  it("broadcasts an event to the gateways only while a stream listens to its tenant", async () => {
    const broadcast = jest.spyOn(p.broker, "broadcast");
    const sent = () => broadcast.mock.calls.filter(([name]) => name === LISTENER_EVENT).length;
    try {
      await emit(acme.live, "quiet.one");
      expect(sent()).toBe(0);
      const s = await listen(acme.live);
      await waitFor("the announcement", () => isListened(p.broker, acme.org.id, "live"));
      await emit(acme.live, "loud.one");
      await emit(acme.test, "other.environment");
      expect(sent()).toBe(1);
      await s.close();
      await waitFor("the announcement withdrawn", () => !isListened(p.broker, acme.org.id, "live"));
      await emit(acme.live, "quiet.two");
      expect(sent()).toBe(1);
    } finally {
      broadcast.mockRestore();
    }
  });
});

describe("the API reference", () => {
  it("documents the stream as Server-Sent Events, with its events parameter, and the report's body", async () => {
    const doc = (await api(p.baseUrl, "GET", "/openapi.json")).body;
    const stream = doc.paths["/listen"].get;
    expect(Object.keys(stream.responses["200"].content)).toEqual(["text/event-stream"]);
    expect(stream.parameters).toContainEqual({ name: "events", in: "query", required: false, schema: { type: "string", maxLength: 5000 } });
    const report = doc.paths["/listen/{id}/attempts"].post.requestBody.content["application/json"].schema;
    expect(report.required.sort()).toEqual(["delivery_id", "duration_ms", "event_id", "status_code"]);
  });
});

describe("the listener's delivery log", () => {
  /** A stream of `key`'s tenant, and the delivery it sent of a new event of `type`. */
  async function delivered(key: string, type: string) {
    const s = await listen(key);
    const event = await emit(key, type);
    await waitFor("the delivery on the stream", () => s.deliveries().some((d) => d.event_id === event.id), 5_000);
    return { s, event, sent: s.deliveries().find((d) => d.event_id === event.id) };
  }

  it("stores a reported answer once, under the id the stream sent, in the reporter's tenant only, and lists it", async () => {
    const { s, event, sent } = await delivered(globex.live, "report.me");
    try {
      const session = s.session.id;
      const report = { delivery_id: sent.id, event_id: event.id, status_code: 500, duration_ms: 12.6, response_excerpt: "boom" };
      const first = await api(p.baseUrl, "POST", `/listen/${session}/attempts`, { key: globex.live, body: report });
      expect(first.status).toBe(201);
      expect(first.body.data).toMatchObject({
        id: report.delivery_id,
        webhook_id: session,
        event_type: "report.me",
        status: "failed",
        attempts: [{ number: 1, status_code: 500, duration_ms: 13, error: "HTTP 500", response_excerpt: "boom" }],
      });
      const again = await api(p.baseUrl, "POST", `/listen/${session}/attempts`, {
        key: globex.live,
        body: { ...report, status_code: 200 },
      });
      expect(again.body.data.status).toBe("failed");
      const log = await api(p.baseUrl, "GET", `/listen/${session}/deliveries`, { key: globex.live });
      expect(log.body.data.map((d: any) => d.id)).toEqual([report.delivery_id]);
      expect(log.body.meta).toMatchObject({ total: 1 });
      // Another environment, or another organization, has no such session: it sees none of it and cannot report.
      for (const other of [globex.test, acme.live]) {
        expectError(await api(p.baseUrl, "GET", `/listen/${session}/deliveries`, { key: other }), 404, "resource_not_found");
        expectError(await api(p.baseUrl, "POST", `/listen/${session}/attempts`, { key: other, body: report }), 404, "resource_not_found");
      }
    } finally {
      await s.close();
    }
  });

  it("takes no session the server did not open, and no delivery id the stream did not send", async () => {
    const { s, event, sent } = await delivered(globex.live, "report.other");
    try {
      const report = { delivery_id: sent.id, event_id: event.id, status_code: 200, duration_ms: 1 };
      const post = (session: string, body: unknown) => api(p.baseUrl, "POST", `/listen/${session}/attempts`, { key: globex.live, body });
      expectError(await post("ls_01jdx3aaaaaaaaaaaaaaaaaaaa", report), 404, "resource_not_found");
      // Another tenant's delivery id, or one made up: refused, nothing stored under it.
      expectError(
        await post(s.session.id, { ...report, delivery_id: "del_01jdx3bbbbbbbbbbbbbbbbbbbb" }),
        400,
        "parameter_invalid",
        "delivery_id",
      );
      expect((await api(p.baseUrl, "GET", `/listen/${s.session.id}/deliveries`, { key: globex.live })).body.data).toEqual([]);
      expect((await post(s.session.id, report)).status).toBe(201);
    } finally {
      await s.close();
    }
  });

  it("refuses malformed reports with the field named", async () => {
    const event = await emit(globex.live, "report.bad");
    const ok = { delivery_id: "del_01jdx3cccccccccccccccccccc", event_id: event.id, status_code: 200, duration_ms: 1 };
    const post = (path: string, body: unknown) => api(p.baseUrl, "POST", path, { key: globex.live, body });
    expectError(await post("/listen/not-a-session/attempts", ok), 400, "parameter_invalid", "id");
    expectError(
      await post("/listen/ls_01jdx3aaaaaaaaaaaaaaaaaaaa/attempts", { ...ok, delivery_id: "x" }),
      400,
      "parameter_invalid",
      "delivery_id",
    );
    expectError(
      await post("/listen/ls_01jdx3aaaaaaaaaaaaaaaaaaaa/attempts", { ...ok, status_code: 99 }),
      400,
      "parameter_invalid",
      "status_code",
    );
    const long = { ...ok, response_excerpt: "x".repeat(1025) };
    expectError(await post("/listen/ls_01jdx3aaaaaaaaaaaaaaaaaaaa/attempts", long), 400, "parameter_invalid", "response_excerpt");
  });
});

describe("the listener's part of the log, with retention", () => {
  it("is pruned with the delivery log: its deliveries and its session go once older than EVENT_RETENTION_DAYS", async () => {
    const s = await listen(globex.live);
    const event = await emit(globex.live, "report.aged");
    await waitFor("the delivery on the stream", () => s.deliveries().some((d) => d.event_id === event.id), 5_000);
    const sent = s.deliveries().find((d) => d.event_id === event.id);
    await s.close();
    const report = { delivery_id: sent.id, event_id: event.id, status_code: 200, duration_ms: 1 };
    expect((await api(p.baseUrl, "POST", `/listen/${s.session.id}/attempts`, { key: globex.live, body: report })).status).toBe(201);
    // A pass as of 31 days from now: the report and its session are past retention.
    const now = Date.now() + 31 * 24 * 60 * 60 * 1000;
    expect(await p.broker.call<number, { now: number }>("webhook-dispatcher.prune", { now })).toBeGreaterThanOrEqual(2);
    expectError(await api(p.baseUrl, "GET", `/listen/${s.session.id}/deliveries`, { key: globex.live }), 404, "resource_not_found");
  });
});

describe("a gateway that stops", () => {
  it("ends its streams with a closing event, and stops", async () => {
    const own = await startPlatform();
    const org = await own.createOrg("Stopping");
    const res = await fetch(`${own.baseUrl}/listen`, { headers: { authorization: `Bearer ${org.live}` } });
    expect(res.status).toBe(200);
    await own.stop();
    const text = await res.text();
    expect(text).toContain("event: session");
    expect(text).toContain('event: closing\ndata: {"reason":"the gateway is stopping"}');
  });
});
