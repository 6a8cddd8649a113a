import { QUOTAS } from "../../shared/records/quotas";
import { api, expectError, usePlatform } from "../helpers/platform";

/**
 * Count quotas under concurrency, through the gateway: a creation and its count are one atomic
 * write (shared/records/quotas.ts), so many clients creating at once never pass the limit.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", RATE_LIMIT_MAX: "100000" });

const call = (method: string, path: string, key: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key, body });

/** Ten keys of one environment, each allowed to create webhooks and workflows. */
async function tenKeys(owner: string): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < 10; i++) {
    const res = await call("POST", "/api-keys", owner, { name: `writer ${i}`, scopes: ["webhooks:write", "workflows:write"] });
    expect(res.status).toBe(201);
    keys.push(res.body.data.key);
  }
  return keys;
}

/** `n` creations at once, spread over `keys`; answers the statuses and error codes seen. */
async function burst(keys: string[], n: number, path: string, body: (i: number) => unknown) {
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => call("POST", path, keys[i % keys.length], body(i))));
  const created = answers.filter((a) => a.status === 201).length;
  const refused = answers.filter((a) => a.status === 400 && a.body.error?.code === "quota_exceeded").length;
  return { created, refused, other: answers.length - created - refused };
}

describe("count quotas with many clients creating at once", () => {
  it(`200 concurrent POST /webhooks from 10 keys make exactly ${QUOTAS.webhooks_per_environment}`, async () => {
    const keys = await tenKeys(suite.acme.live);
    const limit = QUOTAS.webhooks_per_environment;
    const seen = await burst(keys, 200, "/webhooks", (i) => ({ url: `http://127.0.0.1:9/hook/${i}`, events: ["order.created"] }));
    console.log(`200 concurrent webhook creations, quota ${limit}: ${seen.created} created, ${seen.refused} refused`);
    expect(seen).toEqual({ created: limit, refused: 200 - limit, other: 0 });
    const listed = await call("GET", "/webhooks?per_page=1", suite.acme.live);
    expect(listed.body.meta.total).toBe(limit);

    // A deletion makes room for exactly one more.
    const one = (await call("GET", "/webhooks?per_page=1", suite.acme.live)).body.data[0];
    expect((await call("DELETE", `/webhooks/${one.id}`, suite.acme.live)).status).toBe(200);
    const again = await burst(keys, 20, "/webhooks", (i) => ({ url: `http://127.0.0.1:9/again/${i}`, events: ["order.created"] }));
    expect(again).toEqual({ created: 1, refused: 19, other: 0 });
    expectError(
      await call("POST", "/webhooks", suite.acme.live, { url: "http://127.0.0.1:9/full", events: ["order.created"] }),
      400,
      "quota_exceeded",
    );
  }, 60_000);

  it(`260 concurrent POST /workflows from 10 keys make exactly ${QUOTAS.workflows_per_environment}`, async () => {
    const keys = await tenKeys(suite.globex.live);
    const limit = QUOTAS.workflows_per_environment;
    const definition = (i: number) => ({ name: `wf ${i}`, trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] });
    const seen = await burst(keys, 260, "/workflows", definition);
    console.log(`260 concurrent workflow creations, quota ${limit}: ${seen.created} created, ${seen.refused} refused`);
    expect(seen).toEqual({ created: limit, refused: 260 - limit, other: 0 });
    expect((await call("GET", "/workflows?per_page=1", suite.globex.live)).body.meta.total).toBe(limit);

    const one = (await call("GET", "/workflows?per_page=1", suite.globex.live)).body.data[0];
    expect((await call("DELETE", `/workflows/${one.id}`, suite.globex.live)).status).toBe(200);
    const again = await burst(keys, 20, "/workflows", definition);
    expect(again).toEqual({ created: 1, refused: 19, other: 0 });
  }, 60_000);
});
