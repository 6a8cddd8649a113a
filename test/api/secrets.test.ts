import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { anyString } from "../helpers/odd-json";
import { api, expectError, startPlatform, usePlatform, type Platform } from "../helpers/platform";
import { acmeRuns, runsApi, useStepTarget } from "../helpers/steps";

const key = () => randomBytes(32).toString("base64");
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20", SECRETS_KEYS: `k1:${key()}` });
const runs = acmeRuns(suite);
const on = useStepTarget();

/** A value no other test writes, so finding it anywhere means this test's secret leaked. */
const newValue = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;

/** Every byte of the store's files under DATA_DIR (the database, its -wal and -shm), as one buffer. */
const storeBytes = (dataDir: string): Buffer =>
  Buffer.concat(
    readdirSync(dataDir)
      .filter((f) => f.startsWith("store.db"))
      .map((f) => readFileSync(join(dataDir, f))),
  );

describe("secrets", () => {
  it("are created, listed, read and deleted by name and metadata only: no answer ever holds the value", async () => {
    const value = newValue("crud");
    const created = await runs.call("POST", "/secrets", { name: "CRUD_TOKEN", value });
    expect(created.status).toBe(201);
    // Where it is read: a secret is known by its name.
    expect(created.headers.location).toBe("/v1/secrets/CRUD_TOKEN");
    expect(created.body.data).toEqual({
      object: "secret",
      name: "CRUD_TOKEN",
      environment: "live",
      key_id: "k1",
      created_at: expect.any(String),
      updated_at: created.body.data.created_at,
    });
    const answers = [
      created,
      await runs.call("GET", "/secrets"),
      await runs.call("GET", "/secrets/CRUD_TOKEN"),
      await runs.call("POST", "/secrets", { name: "CRUD_TOKEN", value: newValue("replaced") }),
    ];
    expect(answers.map((a) => a.status)).toEqual([201, 200, 200, 201]);
    expect(answers[1].body.data.map((s: any) => s.name)).toContain("CRUD_TOKEN");
    expect(answers[2].body.data).toEqual(created.body.data);
    for (const a of answers) expect(JSON.stringify(a.body)).not.toContain(value);
    // The other environment and the other organization do not see it.
    expectError(await api(suite.p.baseUrl, "GET", "/secrets/CRUD_TOKEN", { key: suite.acme.test }), 404, "resource_not_found", "name");
    expectError(await api(suite.p.baseUrl, "GET", "/secrets/CRUD_TOKEN", { key: suite.globex.live }), 404, "resource_not_found");

    const removed = await runs.call("DELETE", "/secrets/CRUD_TOKEN");
    expect(removed.status).toBe(200);
    expectError(await runs.call("GET", "/secrets/CRUD_TOKEN"), 404, "resource_not_found", "name");
    expectError(await runs.call("DELETE", "/secrets/CRUD_TOKEN"), 404, "resource_not_found");
  });

  it("refuses bad names and values without storing anything, and needs the secrets scopes", async () => {
    expectError(await runs.call("POST", "/secrets", { name: "no-dash", value: "x" }), 400, "parameter_invalid", "name");
    expectError(await runs.call("POST", "/secrets", { name: "OK", value: "" }), 400, "parameter_invalid");
    const long = newValue("x".repeat(8200));
    const tooLong = await runs.call("POST", "/secrets", { name: "OK", value: long });
    expectError(tooLong, 400, "parameter_invalid", "value");
    expect(JSON.stringify(tooLong.body)).not.toContain(long.slice(-24));
    expectError(await runs.call("POST", "/secrets", { name: "OK", value: "v", extra: 1 }), 400, "parameter_unknown");
    expectError(await runs.call("GET", "/secrets/OK"), 404, "resource_not_found");
    const issued = await runs.call("POST", "/api-keys", { name: "runs only", scopes: ["workflows:read", "workflows:write"] });
    const limited = issued.body.data.key as string;
    expectError(await api(suite.p.baseUrl, "GET", "/secrets", { key: limited }), 403, "insufficient_scope");
    expectError(
      await api(suite.p.baseUrl, "POST", "/secrets", { key: limited, body: { name: "A", value: "b" } }),
      403,
      "insufficient_scope",
    );
  });

  it("is encrypted in the store's file: the plaintext is nowhere in it", async () => {
    const value = newValue("at-rest");
    expect((await runs.call("POST", "/secrets", { name: "AT_REST", value })).status).toBe(201);
    // Written through: the name (stored in clear) is in the files read, the value is not.
    const bytes = storeBytes(suite.p.dataDir);
    expect(bytes.includes("AT_REST")).toBe(true);
    expect(bytes.includes(value)).toBe(false);
    expect(bytes.includes(Buffer.from(value).toString("base64"))).toBe(false);
  });

  it("{{secrets.NAME}} reaches the target, and is redacted from the run's stored output and errors", async () => {
    const value = newValue("sent");
    await runs.call("POST", "/secrets", { name: "API_TOKEN", value });
    const issued = await runs.call("POST", "/api-keys", { name: "reader", scopes: ["workflows:read"] });
    on.target.answer = (n, req) => ({ status: n === 1 ? 500 : 200, json: { echoed: req.headers.authorization, body: req.body } });
    const wf = await runs.workflow([
      {
        id: "call",
        type: "http",
        url: `${on.target.url}/pay?t={{secrets.API_TOKEN}}`,
        headers: { authorization: "Bearer {{secrets.API_TOKEN}}" },
        body: { token: "{{secrets.API_TOKEN}}", order: "{{input.order}}" },
        retries: 1,
      },
    ]);
    expect(JSON.stringify(wf)).not.toContain(value);
    const runId = await runs.start(wf.id, { order: "o-1" });
    const run = await runs.ended(wf.id, runId);
    expect(run.status).toBe("succeeded");
    expect(on.target.got).toHaveLength(2);
    for (const req of on.target.got) {
      expect(req.headers.authorization).toBe(`Bearer ${value}`);
      expect(req.path).toBe(`/pay?t=${value}`);
      expect(JSON.parse(req.body)).toEqual({ token: value, order: "o-1" });
    }
    expect(run.steps[0].output.body).toEqual({
      echoed: "Bearer [redacted:API_TOKEN]",
      body: JSON.stringify({ token: "[redacted:API_TOKEN]", order: "o-1" }),
    });
    // Every way to read the run, with every key that may: no value.
    const reads = [
      await runs.call("GET", `/workflows/${wf.id}/runs/${runId}`),
      await runs.call("GET", `/workflows/${wf.id}/runs`),
      await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}/runs/${runId}`, { key: issued.body.data.key }),
      await runs.call("GET", `/workflows/${wf.id}`),
      await runs.call("GET", "/events?per_page=100"),
    ];
    for (const r of reads) {
      expect(r.status).toBe(200);
      expect(JSON.stringify(r.body)).not.toContain(value);
    }
    expect(storeBytes(suite.p.dataDir).includes(value)).toBe(false);
  });

  it("a value of any text (NUL, line separators, BOM, astral and binary characters, JSON's own quotes) reaches the target exactly", async () => {
    on.target.answer = () => ({ status: 200, json: { ok: true } });
    const wf = await runs.workflow([{ id: "call", type: "http", url: `${on.target.url}/odd`, body: { token: "{{secrets.ODD_VALUE}}" } }]);
    await fc.assert(
      fc.asyncProperty(
        anyString.filter((v) => v.length > 0),
        async (value) => {
          // Stored again under the same name: the newest value is the one sent.
          expect((await runs.call("POST", "/secrets", { name: "ODD_VALUE", value })).status).toBe(201);
          const sent = on.target.got.length;
          const run = await runs.ended(wf.id, await runs.start(wf.id, {}));
          expect(run.status).toBe("succeeded");
          expect(on.target.got).toHaveLength(sent + 1);
          expect(JSON.parse(on.target.got[sent].body)).toEqual({ token: value });
        },
      ),
      { numRuns: 10 },
    );
  });

  it("a value that is, or is part of, a field name of the step's own record only redacts the answer: the step still succeeds", async () => {
    on.target.answer = () => ({ status: 200, json: { ok: true, output: "error" } });
    const wf = await runs.workflow([{ id: "call", type: "http", url: `${on.target.url}/names`, body: { token: "{{secrets.NAME_LIKE}}" } }]);
    for (const value of ["k", "ok", "o", "error", "output", "r"]) {
      expect((await runs.call("POST", "/secrets", { name: "NAME_LIKE", value })).status).toBe(201);
      const run = await runs.ended(wf.id, await runs.start(wf.id, {}));
      expect({ value, status: run.status, error: run.steps[0].error }).toEqual({ value, status: "succeeded", error: null });
      expect(run.steps[0].output.status_code).toBe(200);
      expect(JSON.stringify(run.steps[0].output.body)).toContain("[redacted:NAME_LIKE]");
    }
  });

  it("a failed attempt's stored output and error are redacted too", async () => {
    const value = newValue("failing");
    await runs.call("POST", "/secrets", { name: "FAIL_TOKEN", value });
    on.target.answer = (_n, req) => ({ status: 502, json: { refused: req.headers["x-token"] } });
    const wf = await runs.workflow([
      { id: "call", type: "http", url: `${on.target.url}/f`, headers: { "x-token": "{{secrets.FAIL_TOKEN}}" } },
    ]);
    const run = await runs.ended(wf.id, await runs.start(wf.id));
    expect(run.status).toBe("failed");
    expect(run.steps[0].output).toEqual({ status_code: 502, body: { refused: "[redacted:FAIL_TOKEN]" } });
    expect(JSON.stringify(run)).not.toContain(value);
  });

  it("a step using a secret that does not exist fails at once, naming it, and sends nothing", async () => {
    const wf = await runs.workflow([
      { id: "call", type: "http", url: `${on.target.url}/m`, headers: { authorization: "{{secrets.NOT_THERE}}" }, retries: 5 },
      { id: "after", type: "http", url: `${on.target.url}/after` },
    ]);
    const run = await runs.ended(wf.id, await runs.start(wf.id));
    expect(run.status).toBe("failed");
    expect(run.steps.map((s: any) => s.status)).toEqual(["failed", "skipped"]);
    expect(run.steps[0].error).toBe(
      "the step uses {{secrets.NOT_THERE}}, but no secret 'NOT_THERE' exists in the live environment (create it with POST /v1/secrets)",
    );
    expect(on.target.got).toHaveLength(0);
  });
});

describe("rotating SECRETS_KEYS", () => {
  let dataDir: string;
  let p: Platform | undefined;
  afterEach(async () => {
    await p?.stop();
    p = undefined;
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("a new key first: every secret is re-encrypted when a node starts with it; a key dropped while still needed fails the step, saying so", async () => {
    dataDir = mkdtempSync(join(tmpdir(), "wfp-keys-"));
    const [old, next, third] = [key(), key(), key()];
    const env = (keys: string) => ({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", DATA_DIR: dataDir, SECRETS_KEYS: keys });
    const restart = async (keys: string) => {
      await p?.stop();
      p = await startPlatform(env(keys));
    };
    await restart(`old:${old}`);
    const org = await (p as Platform).createOrg("Rotating");
    const r = runsApi(
      () => (p as Platform).baseUrl,
      () => org.live,
    );
    const value = newValue("rotating");
    await r.call("POST", "/secrets", { name: "ROT", value });
    await r.call("POST", "/secrets", { name: "IDLE", value: newValue("idle") });
    const wf = await r.workflow([{ id: "call", type: "http", url: `${on.target.url}/rot`, headers: { "x-rot": "{{secrets.ROT}}" } }]);
    const keyIds = async () =>
      ((await r.call("GET", "/secrets")).body.data as { name: string; key_id: string }[]).map((s) => `${s.name}:${s.key_id}`);
    expect(await keyIds()).toEqual(["IDLE:old", "ROT:old"]);

    await restart(`new:${next},old:${old}`);
    expect(await keyIds()).toEqual(["IDLE:new", "ROT:new"]);
    expect((await r.ended(wf.id, await r.start(wf.id))).status).toBe("succeeded");

    await restart(`new:${next}`);
    expect((await r.ended(wf.id, await r.start(wf.id))).status).toBe("succeeded");
    expect(on.target.got.map((g) => g.headers["x-rot"])).toEqual([value, value]);

    // Dropped before the values were sealed under the key that replaces it: the step says why.
    await restart(`third:${third}`);
    const failed = await r.ended(wf.id, await r.start(wf.id));
    expect(failed.steps[0].error).toBe("the secret 'ROT' is encrypted under key 'new', which SECRETS_KEYS no longer holds (held: third)");
    expect(on.target.got).toHaveLength(2);
  });
});
