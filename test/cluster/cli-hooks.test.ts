import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { cliRun } from "../../tools/procs";
import { waitFor, type NodeProc, startCliServer } from "../helpers/cluster";
import { api } from "../helpers/platform";

/**
 * `hooks test` as a process against a server process: a request signed in each scheme the hook
 * verifies with is accepted and starts a run holding the body sent; a wrong secret is refused 401,
 * the CLI exiting 1 with the reason. And the hook's other commands: get, rotate-secret.
 */
jest.setTimeout(120_000);

let dir: { path: string; remove(): void };
let server: NodeProc;
let gw: string;
let env: Record<string, string>;
let key: string;

beforeAll(async () => {
  ({ dir, server, gw, key, env } = await startCliServer("cli-hooks", "Hooks", {
    RATE_LIMIT_MAX: "1000000",
    SECRETS_KEYS: `k1:${randomBytes(32).toString("base64")}`,
  }));
  // HOOK_SECRET empty: a secret in the test's own environment cannot stand in for --secret.
  env = { ...env, HOOK_SECRET: "" };
});

afterAll(async () => {
  await server?.kill();
  dir?.remove();
});

const STEPS = [{ id: "echo", type: "set", output: { body: "{{ input.request.body }}" } }];

async function hookWorkflow(trigger: Record<string, unknown>) {
  const res = await api(gw, "POST", "/workflows", { key, body: { name: "inbound", trigger, steps: STEPS } });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; hook: { id: string }; hook_secret: string | null };
}

const runOf = async (wf: string, run: string) => (await api(gw, "GET", `/workflows/${wf}/runs/${run}`, { key })).body.data;
const hookOf = async (wf: string) => (await api(gw, "GET", `/workflows/${wf}`, { key })).body.data.hook;

describe("hooks test, get and rotate-secret", () => {
  const stored = `whsec_${randomBytes(24).toString("base64")}`;
  const schemes: [string, Record<string, unknown>, string | null][] = [
    ["standard_webhooks", { scheme: "standard_webhooks" }, null],
    ["stripe, with a stored secret", { scheme: "stripe", secret: "{{secrets.STRIPE_HOOK}}" }, stored],
    ["github", { scheme: "github" }, null],
    ["hmac_sha256, a configured header in base64", { scheme: "hmac_sha256", header: "x-shopify-hmac-sha256", encoding: "base64" }, null],
    ["hmac_sha256 with a prefix", { scheme: "hmac_sha256", header: "service-signature", prefix: "sha256=" }, null],
    ["none", { scheme: "none" }, null],
  ];

  beforeAll(async () => {
    const res = await api(gw, "POST", "/secrets", { key, body: { name: "STRIPE_HOOK", value: stored } });
    expect(res.status).toBe(201);
  });

  it.each(schemes)("signs %s: accepted 202, a run started with the body sent", async (_, verify, secret) => {
    const wf = await hookWorkflow({ type: "webhook", verify });
    const given = secret ?? wf.hook_secret;
    const args = ["hooks", "test", wf.id, "--data", '{"order": "o-1", "n": 2}', "--json", ...(given ? ["--secret", given] : [])];
    const sent = cliRun(args, env);
    expect(sent).toMatchObject({ status: 0, stderr: "" });
    const receipt = JSON.parse(sent.stdout);
    expect(receipt).toMatchObject({ object: "hook_receipt", duplicate: false, filtered: false, run_id: expect.stringMatching(/^run_/) });
    await waitFor("the run to succeed", async () => (await runOf(wf.id, receipt.run_id)).status === "succeeded");
    const run = await runOf(wf.id, receipt.run_id);
    expect(run.input.request.body).toEqual({ order: "o-1", n: 2 });
    expect(run.trigger).toMatchObject({ type: "webhook", hook_id: wf.hook.id });
    // Counts are stored about once a second.
    await waitFor("the hook's count", async () => (await hookOf(wf.id)).accepted === 1);
    expect(await hookOf(wf.id)).toMatchObject({ refused: 0 });
  });

  it("refuses a wrong secret 401: exit 1 with the reason, and the hook counts it", async () => {
    const wf = await hookWorkflow({ type: "webhook", verify: { scheme: "github" } });
    const wrong = cliRun(["hooks", "test", wf.id, "--secret", "whsec_not-the-one"], env);
    expect(wrong.status).toBe(1);
    expect(wrong.stdout).toBe("");
    expect(wrong.stderr).toContain("Error: 401 invalid_signature: The request's signature does not match its body");
    expect(wrong.stderr).toContain("is --secret the hook's current secret?");
    await waitFor("the refusal counted", async () => (await hookOf(wf.id)).refused === 1);
    expect(await hookOf(wf.id)).toMatchObject({ accepted: 0, last_refused_reason: "bad_signature" });
  });

  it("sends a file's bytes exactly, with the headers given: a duplicate, and a request the filter passes over", async () => {
    const wf = await hookWorkflow({
      type: "webhook",
      verify: { scheme: "standard_webhooks" },
      dedupe: { header: "webhook-id" },
      filter: "request.headers['x-kind'] == 'order'",
      headers: ["x-kind"],
    });
    const file = join(dir.path, "form.txt");
    writeFileSync(file, "a=1&b=two words\n");
    const args = ["hooks", "test", wf.id, "--secret", wf.hook_secret!, "--file", file];
    const form = [
      "--header",
      "content-type: application/x-www-form-urlencoded",
      "--header",
      "X-Kind:order",
      "--header",
      "webhook-id:msg_cli_1",
    ];
    const first = cliRun([...args, ...form], env);
    expect(first.status).toBe(0);
    expect(first.stdout.split("\n")).toEqual([
      `POST ${gw}/hooks/${wf.hook.id} signed standard_webhooks (webhook-id, webhook-timestamp, webhook-signature)`,
      expect.stringMatching(/^accepted \(202\): run run_\w+ started$/),
      "",
    ]);
    const runId = /run (run_\w+)/.exec(first.stdout)![1];
    const again = cliRun([...args, ...form], env);
    expect(again.stdout).toContain(`\nduplicate (200): answered with the first request's run ${runId}\n`);
    const other = cliRun([...args, "--header", "x-kind:refund"], env);
    expect(other.stdout).toContain("\nfiltered (200): the hook's filter passed over the request; no run started\n");
    await waitFor("the run to succeed", async () => (await runOf(wf.id, runId)).status === "succeeded");
    const run = await runOf(wf.id, runId);
    expect(run.input.request).toMatchObject({
      body: "a=1&b=two words\n",
      headers: { "content-type": "application/x-www-form-urlencoded", "x-kind": "order", "webhook-id": "msg_cli_1" },
    });
    expect(run.trigger.dedupe_key).toBe("msg_cli_1");
  });

  it("workflows create prints the hook and its secret once; hooks get and hooks rotate-secret", async () => {
    const definition = { name: "GitHub pushes", trigger: { type: "webhook", verify: { scheme: "github" } }, steps: STEPS };
    const created = cliRun(["workflows", "create", "--definition", JSON.stringify(definition)], env);
    expect(created.status).toBe(0);
    const [head, signing, hookLine, secretLine] = created.stdout.trimEnd().split("\n");
    expect(head).toMatch(/^wf_\w+ {2}GitHub pushes {2}v1$/);
    expect(signing).toMatch(/^signing secret: whsec_\S+ \(shown once\)$/);
    const wf = head.split(" ")[0];
    const hookId = (await hookOf(wf)).id as string;
    expect(hookLine).toBe(`hook: POST ${gw}/hooks/${hookId}`);
    const secret = /^hook secret: (whsec_\S+) \(shown once\)$/.exec(secretLine)![1];
    expect(cliRun(["hooks", "test", wf, "--secret", secret], env).status).toBe(0);
    expect(cliRun(["hooks", "test", wf, "--secret", "whsec_forged"], env).status).toBe(1);
    await waitFor("the counts stored", async () => (await hookOf(wf)).refused === 1 && (await hookOf(wf)).accepted === 1);
    const got = cliRun(["hooks", "get", wf], env);
    expect(got.status).toBe(0);
    const lines = got.stdout.trimEnd().split("\n");
    expect(lines.slice(0, 3)).toEqual([
      `${hookId}  POST ${gw}/hooks/${hookId}`,
      "verify github, secret generated",
      "accepted 1, filtered 0, duplicates 0, refused 1",
    ]);
    expect(lines[3]).toMatch(/^last accepted \d{4}-\d\d-\d\dT[\d:.]+Z$/);
    expect(lines[4]).toMatch(/^last refused \d{4}-\d\d-\d\dT[\d:.]+Z \(bad_signature\)$/);
    expect(JSON.parse(cliRun(["hooks", "get", wf, "--json"], env).stdout)).toMatchObject({ id: hookId, accepted: 1, refused: 1 });

    const rotated = cliRun(["hooks", "rotate-secret", wf], env);
    expect(rotated.status).toBe(0);
    const [, fresh] = /new secret: (whsec_\S+) \(shown once\); the old one is accepted until \S+Z$/m.exec(rotated.stdout)!;
    expect(fresh).not.toBe(secret);
    // Both are accepted during the overlap: the provider's settings can be changed meanwhile.
    expect(cliRun(["hooks", "test", wf, "--secret", fresh], env).status).toBe(0);
    expect(cliRun(["hooks", "test", wf, "--secret", secret], env).status).toBe(0);
    expect(cliRun(["hooks", "get", wf], env).stdout).toContain("secret generated; the replaced one is accepted until ");
    const manual = cliRun(
      [
        "hooks",
        "get",
        (await api(gw, "POST", "/workflows", { key, body: { name: "m", trigger: { type: "manual" }, steps: STEPS } })).body.data.id,
      ],
      env,
    );
    expect(manual.status).toBe(2);
    expect(manual.stderr).toContain("has a manual trigger: only a webhook trigger has a hook");
  });

  it("says what is missing: a secret, a webhook trigger, a body that is JSON, a header's form", async () => {
    const wf = await hookWorkflow({ type: "webhook", verify: { scheme: "stripe" } });
    const noSecret = cliRun(["hooks", "test", wf.id], env);
    expect(noSecret.status).toBe(2);
    expect(noSecret.stderr).toContain("--secret is required: the hook verifies with stripe (the hook_secret shown when the hook was made)");
    expect(noSecret.stderr).toContain("Usage: npm run --silent cli -- hooks test WORKFLOW_ID");
    const fromEnv = cliRun(["hooks", "test", wf.id], { ...env, HOOK_SECRET: wf.hook_secret! });
    expect(fromEnv.status).toBe(0);
    expect(fromEnv.stdout).toContain("signed stripe (stripe-signature)\naccepted (202)");
    const manual = await api(gw, "POST", "/workflows", { key, body: { name: "m", trigger: { type: "manual" }, steps: STEPS } });
    const notHook = cliRun(["hooks", "test", manual.body.data.id, "--secret", "x"], env);
    expect(notHook.status).toBe(2);
    expect(notHook.stderr).toContain("has a manual trigger: only a webhook trigger has a hook");
    const notJson = cliRun(["hooks", "test", wf.id, "--secret", "x", "--data", "{nope"], env);
    expect(notJson.status).toBe(2);
    expect(notJson.stderr).toContain("--data must be JSON");
    const badHeader = cliRun(["hooks", "test", wf.id, "--secret", "x", "--header", "no colon"], env);
    expect(badHeader.status).toBe(2);
    expect(badHeader.stderr).toContain("--header must be NAME:VALUE");
    const unknown = cliRun(["hooks", "test", "wf_nope", "--secret", "x"], env);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain("404");
  });
});
