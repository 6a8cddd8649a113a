import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { api, startPlatform, type Platform } from "../helpers/platform";
import { anyJson, anyKey } from "../helpers/odd-json";

/**
 * Every JSON value the API accepts comes back exactly, through real HTTP, from the answer that
 * stored it and from the store after the platform restarts on the same DATA_DIR: generated event
 * `data` and run `input` (any strings, keys such as `.`, `$`, `$$date`, `__proto__`, numbers as
 * JSON has them), compared as JSON text so key order and `__proto__` keys count.
 */
const anyObject = fc.dictionary(anyKey, anyJson, { maxKeys: 6, noNullPrototype: true });
const asJson = (value: unknown) => JSON.stringify(value);

describe("values round-trip through the API and a restart", () => {
  let dir: string;
  let p: Platform;
  let key: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "wfp-rt-"));
    p = await startPlatform({ DATA_DIR: dir, RATE_LIMIT_MAX: "100000" });
    key = (await p.createOrg("Round Trip")).live;
  });
  afterAll(async () => {
    await p?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads back every generated event data and run input exactly, also after a restart", async () => {
    const values = fc.sample(anyObject, { numRuns: 150, seed: 22 });
    const workflow = await api(p.baseUrl, "POST", "/workflows", {
      key,
      body: { name: "echo", trigger: { type: "manual" }, steps: [{ type: "delay", duration_ms: 1 }] },
    });
    expect(workflow.status).toBe(201);
    const events: string[] = [];
    const runs: string[] = [];
    for (const value of values) {
      const event = await api(p.baseUrl, "POST", "/events", { key, body: { type: "round.trip", data: value } });
      expect(event.status).toBe(201);
      expect(asJson(event.body.data.data)).toBe(asJson(value));
      events.push(event.body.data.id);
      const run = await api(p.baseUrl, "POST", `/workflows/${workflow.body.data.id}/runs`, { key, body: { input: value } });
      expect(run.status).toBe(201);
      expect(asJson(run.body.data.input)).toBe(asJson(value));
      runs.push(run.body.data.id);
    }

    await p.stop();
    p = await startPlatform({ DATA_DIR: dir, RATE_LIMIT_MAX: "100000" });
    for (const [i, value] of values.entries()) {
      const event = await api(p.baseUrl, "GET", `/events/${events[i]}`, { key });
      expect(asJson(event.body.data?.data)).toBe(asJson(value));
      const run = await api(p.baseUrl, "GET", `/workflows/${workflow.body.data.id}/runs/${runs[i]}`, { key });
      expect(asJson(run.body.data?.input)).toBe(asJson(value));
    }
  });
});
