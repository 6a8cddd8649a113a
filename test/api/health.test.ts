import { request } from "undici";
import { usePlatform } from "../helpers/platform";

const suite = usePlatform();
const root = () => suite.p.baseUrl.replace(/\/v1$/, "");
async function get(path: string, method: "GET" | "HEAD" = "GET") {
  const res = await request(`${root()}${path}`, { method });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

describe("health and readiness", () => {
  it("GET /health answers without a key while the process runs", async () => {
    const res = await get("/health");
    expect(res).toMatchObject({ status: 200, body: { status: "ok" } });
    expect(res.headers["request-id"]).toMatch(/^req_/);
    expect((await get("/health", "HEAD")).status).toBe(200);
  });

  it("GET /ready reports the broker, the store and every service, and names a missing one", async () => {
    const ready = await get("/ready");
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: "ready", broker: true, store: "ok", missing: [] });
    expect(Object.keys(ready.body.services).sort()).toEqual([
      "analytics",
      "auth",
      "events",
      "gateway",
      "keys",
      "orgs",
      "webhook-dispatcher",
      "webhooks",
      "workflows",
    ]);

    const broker = suite.p.broker;
    const analytics = broker.getLocalService("analytics")!;
    await broker.destroyService(analytics);
    const degraded = await get("/ready");
    expect(degraded).toMatchObject({ status: 200, body: { status: "degraded", missing: ["analytics"], services: { analytics: false } } });
    broker.createService(analytics.originalSchema);
    await broker.waitForServices(["analytics"]);
    expect((await get("/ready")).body.status).toBe("ready");
  });

  it("is not ready without the auth service: no request could be authenticated", async () => {
    const broker = suite.p.broker;
    const auth = broker.getLocalService("auth")!;
    await broker.destroyService(auth);
    const res = await get("/ready");
    expect(res).toMatchObject({ status: 503, body: { status: "not_ready", missing: ["auth"] } });
    broker.createService(auth.originalSchema);
    await broker.waitForServices(["auth"]);
    expect((await get("/ready")).status).toBe(200);
  });
});
