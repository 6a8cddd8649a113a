import { createServer } from "node:net";
import { request } from "undici";
import { api, startPlatform, type Platform } from "../helpers/platform";

const freePort = () =>
  new Promise<number>((ok) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => ok(port));
    });
  });

let p: Platform;
let port: number;
beforeAll(async () => {
  port = await freePort();
  p = await startPlatform({ METRICS_PORT: String(port) });
});
afterAll(() => p.stop());

it("serves Prometheus metrics on METRICS_PORT, not on the API's port", async () => {
  const { live } = await p.createOrg("Metered");
  for (let i = 0; i < 3; i++) expect((await api(p.baseUrl, "GET", "/api-keys", { key: live })).status).toBe(200);
  const res = await request(`http://127.0.0.1:${port}/metrics`);
  expect(res.statusCode).toBe(200);
  const text = await res.body.text();
  const line = text.split("\n").find((l) => l.startsWith("moleculer_request_total{") && l.includes('action="keys.list"'));
  expect(line).toBeDefined();
  expect(Number(line!.split(" ").pop())).toBeGreaterThanOrEqual(3);
  expect(text).toMatch(/^# TYPE moleculer_request_time histogram/m);
  expect((await request(`${p.baseUrl.replace(/\/v1$/, "")}/metrics`)).statusCode).toBe(404);
});
