import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cliRun, waitForServerMark } from "../../tools/procs";
import { freePort, startNode, tempDir, waitFor, waitForGateway, type NodeProc } from "../helpers/cluster";
import { api } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * docs/cli-transcript.md is this test's output: a first session with the CLI, each command run as
 * a process against a server process, ids, secrets, times and ports replaced by stable stand-ins.
 * The test fails when the document differs from what the CLI prints today;
 * `UPDATE_TRANSCRIPT=1 npx jest test/cluster/cli-transcript.test.ts` writes it again.
 */
jest.setTimeout(180_000);

const DOC = join(__dirname, "..", "..", "docs", "cli-transcript.md");

let dir: { path: string; remove(): void };
let server: NodeProc;
let rx: Receiver;
let gw: string;

beforeAll(async () => {
  dir = tempDir();
  rx = await startReceiver();
  const port = await freePort();
  server = startNode("cli-transcript", { DATA_DIR: dir.path, PORT: String(port), WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
  gw = `http://127.0.0.1:${port}/v1`;
  await waitForServerMark(dir.path, server);
});

afterAll(async () => {
  await server?.kill();
  await rx?.close();
  dir?.remove();
});

/** Each id, secret, time and port replaced by a stand-in of the same length, numbered in order of appearance. */
function normaliser() {
  const ids = new Map<string, string>();
  return (text: string): string =>
    text
      .replace(/\b([a-z]{2,5})_([0-9a-hjkmnp-tv-z]{26})\b/g, (whole, prefix: string) => {
        if (!ids.has(whole)) ids.set(whole, `${prefix}_${String(ids.size + 1).padStart(26, "0")}`);
        return ids.get(whole)!;
      })
      .replace(/\bhk_[A-Za-z0-9_-]{32}(?![A-Za-z0-9_-])/g, (whole) => {
        if (!ids.has(whole)) ids.set(whole, `hk_${String(ids.size + 1).padStart(32, "0")}`);
        return ids.get(whole)!;
      })
      .replace(/\bwhsec_[A-Za-z0-9+/=]+/g, (s) => `whsec_${"x".repeat(s.length - 6)}`)
      .replace(/\bsvc_(live|test)_[A-Za-z0-9_-]+/g, (s, env: string) => `svc_${env}_${"x".repeat(s.length - env.length - 5)}`)
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z/g, (s) => (s.length === 24 ? "2026-01-15T10:00:00.000Z" : "2026-01-15T10:00:00Z"))
      .replace(/"last4":"[^"]{4}"/g, '"last4":"xxxx"')
      .replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:43210")
      .replace(/\b\d+ ms\b/g, "12 ms");
}

interface Step {
  say: string;
  args: string[];
  /** Shown in the document instead of the arguments run (a secret given through the environment). */
  shown?: string;
  /** Called before the command runs (a state the engine reaches on its own time). */
  before?: () => Promise<void>;
}

describe("the CLI transcript (docs/cli-transcript.md)", () => {
  it("is what the CLI prints for a first session", async () => {
    const normalise = normaliser();
    const env: Record<string, string> = { API_URL: gw, DATA_DIR: dir.path };
    const ids: Record<string, string> = {};
    const sections: string[] = [];
    const run = async (step: Step, expectStatus = 0): Promise<string> => {
      await step.before?.();
      const res = cliRun(step.args, env);
      expect({ command: step.args.join(" "), status: res.status, stderr: res.stderr }).toEqual({
        command: step.args.join(" "),
        status: expectStatus,
        stderr: expectStatus === 0 ? "" : res.stderr,
      });
      const shown = step.shown ?? step.args.map((a) => (/^[\w./:@,=-]+$/.test(a) ? a : `'${a}'`)).join(" ");
      const output = normalise(`${res.stdout}${res.stderr}`.trimEnd());
      sections.push(`${step.say}\n\n\`\`\`console\n$ npm run --silent cli -- ${normalise(shown)}\n${output}\n\`\`\``);
      return res.stdout;
    };

    const org = JSON.parse(
      await run({
        say: "An organization, with a live and a test key (the secrets are printed once):",
        args: ["orgs", "create", "--name", "Acme"],
      }),
    );
    env.API_KEY = org.api_keys.find((k: any) => k.environment === "test").key;
    await waitForGateway(gw, env.API_KEY);
    sections.push("From here on `API_KEY` holds the test key; every command acts in its organization and environment.");

    const hook = await run({
      say: "A webhook for orders, and the local receiver's secret printed once:",
      args: [
        "webhooks",
        "create",
        "--url",
        rx.url("/orders"),
        "--events",
        "order.created,workflow.completed",
        "--description",
        "Orders to the warehouse",
      ],
    });
    ids.hook = /^(wh_\w+)/.exec(hook)![1]!;
    rx.setSecret("/orders", /signing secret: (whsec_\S+)/.exec(hook)![1]!);
    await run({ say: "The webhooks of the key's environment:", args: ["webhooks", "list"] });

    const emitted = await run({
      say: "An event of a client's own type:",
      args: ["trigger", "order.created", "--data", '{"order":"o_1","sku":"A-1"}'],
    });
    ids.event = /emitted (evt_\w+)/.exec(emitted)![1]!;
    await rx.waitFor(() => rx.byPath("/orders").length === 1);

    await run({
      say: "A system type cannot be emitted by a client; `trigger` makes it happen through the API with a fixture that removes itself:",
      args: ["trigger", "workflow.completed"],
    });
    await rx.waitFor(() => rx.byPath("/orders").length === 2);
    const deliveries = async () => (await api(gw, "GET", `/webhooks/${ids.hook}/deliveries`, { key: env.API_KEY })).body.data as any[];

    await run({
      say: "The webhook's health after those two deliveries:",
      args: ["webhooks", "get", ids.hook],
      before: () =>
        waitFor("both deliveries to succeed", async () => (await deliveries()).filter((d) => d.status === "succeeded").length === 2),
    });
    await run({ say: "The order event sent again to every webhook that got it:", args: ["events", "resend", ids.event] });
    await rx.waitFor(() => rx.byPath("/orders").length === 3);

    const wf = await run({
      say: "A workflow that asks for an approval, then emits an event:",
      args: [
        "workflows",
        "create",
        "--definition",
        JSON.stringify({
          name: "Refunds",
          trigger: { type: "manual" },
          steps: [
            { id: "ask", type: "approval", message: "Refund {{input.amount}} EUR?" },
            { id: "done", type: "emit", event_type: "refund.sent", data: {} },
          ],
        }),
      ],
    });
    ids.wf = /^(wf_\w+)/.exec(wf)![1]!;
    const started = await run({ say: "A run of it:", args: ["workflows", "run", ids.wf, "--input", '{"amount":40}'] });
    ids.run = /(run_\w+)/.exec(started)![1]!;
    const runStatus = async () => (await api(gw, "GET", `/workflows/${ids.wf}/runs/${ids.run}`, { key: env.API_KEY })).body.data.status;
    await run({
      say: "It waits for a person:",
      args: ["runs", "get", ids.wf, ids.run],
      before: () => waitFor("the run to wait", async () => (await runStatus()) === "waiting"),
    });
    await run({ say: "Approved, with a comment:", args: ["approve", ids.wf, ids.run, "--comment", "Receipt checked"] });
    await run({
      say: "The run once it has ended:",
      args: ["runs", "get", ids.wf, ids.run],
      before: () => waitFor("the run to end", async () => (await runStatus()) === "succeeded"),
    });
    await run({ say: "Any other path of the API, its answer printed whole:", args: ["get", `/workflows/${ids.wf}/runs?per_page=1`] });
    const inbound = await run({
      say: "A workflow started by a provider's signed request (an inbound webhook); the hook's address and secret are printed once:",
      args: [
        "workflows",
        "create",
        "--definition",
        JSON.stringify({
          name: "GitHub pushes",
          trigger: { type: "webhook", verify: { scheme: "github" } },
          steps: [{ id: "note", type: "set", output: { ref: "{{ input.request.body.ref }}" } }],
        }),
      ],
    });
    ids.inbound = /^(wf_\w+)/.exec(inbound)![1]!;
    const hookSecret = /hook secret: (whsec_\S+)/.exec(inbound)![1]!;
    env.HOOK_SECRET = hookSecret;
    const data = '{"ref":"refs/heads/main"}';
    await run({
      say: "With the hook's secret in `HOOK_SECRET`, a request signed as GitHub signs it, sent to the hook:",
      args: ["hooks", "test", ids.inbound, "--data", data, "--header", "x-github-event:push"],
      shown: `hooks test ${ids.inbound} --data '${data}' --header x-github-event:push`,
    });
    delete env.HOOK_SECRET;
    await run({
      say: "What the hook has received (counts are stored about once a second):",
      args: ["hooks", "get", ids.inbound],
      before: () =>
        waitFor("the hook's count", async () => {
          const res = await api(gw, "GET", `/workflows/${ids.inbound}`, { key: env.API_KEY });
          return res.body.data.hook.accepted === 1;
        }),
    });

    await run({ say: "A mistake in the command line exits 2 with the command's usage:", args: ["trigger", "webhook.disabled"] }, 2);

    const doc = [
      "# A first session with the CLI",
      "",
      "<!-- Written by test/cluster/cli-transcript.test.ts: do not edit. UPDATE_TRANSCRIPT=1 npx jest test/cluster/cli-transcript.test.ts -->",
      "",
      "Every command below ran as a process against a server, in this order; ids, secrets, times and the",
      "port are replaced by stand-ins of the same length (`wh_00…01`, `whsec_xxx…`, `2026-01-15T10:00:00.000Z`),",
      "the same value by the same stand-in. [The command line](cli.md) describes every command.",
      "",
      sections.join("\n\n"),
      "",
    ].join("\n");
    if (process.env.UPDATE_TRANSCRIPT === "1") writeFileSync(DOC, doc);
    // When this fails, the CLI's output changed: read the difference, then write the document again (above).
    expect(readFileSync(DOC, "utf8")).toBe(doc);
  });
});
