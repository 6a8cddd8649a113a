import { Webhook } from "standardwebhooks";
import { api, expectError, usePlatform } from "../helpers/platform";
import { acmeRuns, useStepTarget, type StepRequest } from "../helpers/steps";

/** No SECRETS_KEYS here: the secrets endpoints say they are off. */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20" });
const runs = acmeRuns(suite);
const on = useStepTarget();

/** Whether the request verifies, with the stock Standard Webhooks library, under `secret`. */
function verifies(secret: string, req: StepRequest): boolean {
  try {
    new Webhook(secret).verify(req.body, req.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

describe("http steps a receiver can trust", () => {
  it("the signing secret is shown on creation only", async () => {
    const wf = await runs.workflow([{ type: "http", url: `${on.target.url}/x` }]);
    expect(wf.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const read = await runs.call("GET", `/workflows/${wf.id}`);
    const listed = await runs.call("GET", "/workflows");
    for (const answer of [read, listed]) expect(JSON.stringify(answer.body)).not.toContain(wf.signing_secret);
    expect(read.body.data).not.toHaveProperty("signing_secret");
  });

  it("retries of a failing step carry the same Idempotency-Key and webhook-id, each signed and verifiable", async () => {
    on.target.answer = (n) => ({ status: n < 3 ? 500 : 200, json: { n } });
    const wf = await runs.workflow([
      {
        id: "call",
        type: "http",
        url: `${on.target.url}/call/{{run.id}}`,
        headers: { "x-attempt": "{{run.attempt}}" },
        body: { run: "{{run.id}}", attempt: "{{run.attempt}}", workflow: "{{workflow.id}}" },
        retries: 3,
      },
    ]);
    const runId = await runs.start(wf.id);
    const run = await runs.ended(wf.id, runId);
    expect(run.status).toBe("succeeded");
    expect(run.steps[0].attempt_count).toBe(3);
    expect(on.target.got).toHaveLength(3);
    expect(on.target.got.map((r) => r.path)).toEqual(Array(3).fill(`/call/${runId}`));
    expect(on.target.got.map((r) => JSON.parse(r.body))).toEqual([1, 2, 3].map((attempt) => ({ run: runId, attempt, workflow: wf.id })));
    expect(on.target.got.map((r) => r.headers["x-attempt"])).toEqual(["1", "2", "3"]);
    expect(new Set(on.target.got.map((r) => r.headers["idempotency-key"]))).toEqual(new Set([`${runId}:call`]));
    expect(new Set(on.target.got.map((r) => r.headers["webhook-id"]))).toEqual(new Set([`${runId}:call`]));
    for (const req of on.target.got) expect(verifies(wf.signing_secret, req)).toBe(true);
    // Under another secret, or with the body changed, it does not verify.
    const other = await runs.workflow([{ type: "http", url: `${on.target.url}/x` }]);
    expect(verifies(other.signing_secret, on.target.got[0])).toBe(false);
    expect(verifies(wf.signing_secret, { ...on.target.got[0], body: on.target.got[0].body.replace(runId, "run_forged") })).toBe(false);
  });

  it("another run of the same workflow sends another key; a step's own Idempotency-Key is kept", async () => {
    const wf = await runs.workflow([
      { id: "a", type: "http", url: `${on.target.url}/a` },
      { id: "b", type: "http", url: `${on.target.url}/b`, headers: { "Idempotency-Key": "order-{{input.order}}" } },
    ]);
    const [one, two] = [await runs.start(wf.id, { order: 7 }), await runs.start(wf.id, { order: 7 })];
    await runs.ended(wf.id, one);
    await runs.ended(wf.id, two);
    const keys = (path: string) => on.target.got.filter((r) => r.path === path).map((r) => r.headers["idempotency-key"]);
    expect(keys("/a").sort()).toEqual([`${one}:a`, `${two}:a`].sort());
    expect(keys("/b")).toEqual(["order-7", "order-7"]);
    for (const req of on.target.got) expect(verifies(wf.signing_secret, req)).toBe(true);
  });

  it("after rotate-secret the new secret signs, the old one still verifies during the overlap, and a second rotation retires it", async () => {
    const wf = await runs.workflow([{ id: "call", type: "http", url: `${on.target.url}/rotated` }]);
    const rotated = await runs.call("POST", `/workflows/${wf.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const second: string = rotated.body.data.signing_secret;
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(wf.signing_secret);
    expect(rotated.body.data.version).toBe(1);
    await runs.ended(wf.id, await runs.start(wf.id));
    const [signed] = on.target.got;
    expect(verifies(second, signed)).toBe(true);
    expect(verifies(wf.signing_secret, signed)).toBe(true);

    const third: string = (await runs.call("POST", `/workflows/${wf.id}/rotate-secret`)).body.data.signing_secret;
    await runs.ended(wf.id, await runs.start(wf.id));
    const later = on.target.got[1];
    expect([third, second, wf.signing_secret].map((s) => verifies(s, later))).toEqual([true, true, false]);
    expectError(await runs.call("POST", "/workflows/wf_01jdx3aaaaaaaaaaaaaaaaaaaa/rotate-secret"), 404, "resource_not_found");
    const viewer = suite.globex.live;
    expectError(await api(suite.p.baseUrl, "POST", `/workflows/${wf.id}/rotate-secret`, { key: viewer }), 404, "resource_not_found");
  });

  it("an idempotent replay of POST /workflows does not show the secret again", async () => {
    const body = { name: "wf", trigger: { type: "manual" }, steps: [{ type: "http", url: `${on.target.url}/x` }] };
    const headers = { "idempotency-key": "create-wf-signing-1" };
    const first = await api(suite.p.baseUrl, "POST", "/workflows", { key: suite.acme.live, body, headers });
    const replay = await api(suite.p.baseUrl, "POST", "/workflows", { key: suite.acme.live, body, headers });
    expect(first.body.data.signing_secret).toMatch(/^whsec_/);
    expect(replay.body.data.id).toBe(first.body.data.id);
    expect(replay.body.data.signing_secret).toBeNull();
  });

  it("templates are checked when the workflow is written: run and workflow fields, secrets in http steps only", async () => {
    const bad = async (step: unknown, param: string) =>
      expectError(
        await runs.call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps: [step] }),
        400,
        "parameter_invalid",
        param,
      );
    await bad({ type: "http", url: `${on.target.url}/{{run.nope}}` }, "steps[0].url");
    await bad({ type: "emit", event_type: "x.y", data: { token: "{{secrets.TOKEN}}" } }, "steps[0].data.token");
    await bad({ type: "approval", message: "token {{secrets.TOKEN}}" }, "steps[0].message");
    await bad({ type: "http", url: `${on.target.url}/x`, headers: { a: "{{secrets.no-dash}}" } }, "steps[0].headers.a");
    const ok = await runs.call("POST", "/workflows", {
      name: "wf",
      trigger: { type: "manual" },
      steps: [{ type: "emit", event_type: "x.y", data: { run: "{{run.id}}", n: "{{run.attempt}}", wf: "{{ workflow.id }}" } }],
    });
    expect(ok.status).toBe(201);
  });

  it("without SECRETS_KEYS, creating a secret answers 503 naming the setting; a step using one fails saying so", async () => {
    const res = await runs.call("POST", "/secrets", { name: "TOKEN", value: "s3cr3t-value" });
    expectError(res, 503, "service_unavailable");
    expect(res.body.error.message).toContain("SECRETS_KEYS");
    const wf = await runs.workflow([
      { id: "call", type: "http", url: `${on.target.url}/x`, headers: { authorization: "{{secrets.TOKEN}}" }, retries: 3 },
    ]);
    const run = await runs.ended(wf.id, await runs.start(wf.id));
    expect(run.status).toBe("failed");
    expect(run.steps[0].error).toContain("SECRETS_KEYS is not set");
    expect(on.target.got).toHaveLength(0);
  });
});
