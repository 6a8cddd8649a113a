import { execFile, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { request } from "undici";
import { freePort, waitFor } from "../../tools/procs";
import { api, startPlatform, type Platform, type TestOrg } from "../helpers/platform";
import { ERROR_CODES } from "../../shared/errors";
import { SCOPE_NAMES } from "../../shared/api/scopes";
import { SYSTEM_EVENT_TYPES } from "../../shared/records/events";
import { STEP_TYPES } from "../../services/workflows/workflows.logic";
import { ROUTES } from "../../services/gateway/routes";
import { expectTamperedRefused, Receiver } from "./receivers";
import { anchorsOf, codeBlocks, docFiles, linkProblems, markers, relativeLinks, repoPaths, slugOf } from "./markdown";

/**
 * The docs cannot drift from the platform: every relative link and anchor of README.md and docs/
 * resolves, every JSON example parses, the examples marked `<!-- test: … -->` are sent to a running
 * platform, and the README's quickstart runs as written: its curl commands, and its receiver as a
 * real Node process verifying a real signed delivery.
 */
jest.setTimeout(60_000);

const ROOT = resolve(__dirname, "../..");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const FILES = docFiles(ROOT);
const README = read("README.md");

describe("the Markdown reader", () => {
  it("makes anchors as GitHub does", () => {
    expect(slugOf("The gateway: `GET /v1/api-keys/{id}`")).toBe("the-gateway-get-v1api-keysid");
    expect(slugOf("Growth: 10k to 1M events")).toBe("growth-10k-to-1m-events");
    expect(slugOf("0001: Unknown *parameters* [refused](x.md)")).toBe("0001-unknown-parameters-refused");
    expect(slugOf("snake_case and kebab-case")).toBe("snake_case-and-kebab-case");
    expect([...anchorsOf("# A\n## Same\n```\n# not a heading\n```\n## Same\n")]).toEqual(["a", "same", "same-1"]);
  });

  it("reads links in prose only, and markers just before a block", () => {
    const md = "[a](x.md) `[b](y.md)` [c](https://e.com)\n\n```sh\n[d](z.md)\n```\n<!-- test: workflow -->\n\n```json\n{}\n```\n";
    expect(relativeLinks(md).map((l) => l.target)).toEqual(["x.md"]);
    expect(codeBlocks(md).map((b) => [b.lang, b.marker])).toEqual([
      ["sh", undefined],
      ["json", "workflow"],
    ]);
  });

  it("reads repository paths from inline code, leaving placeholders out", () => {
    const md =
      "`services/gateway/routes.ts` and `test/unit/<source path>.test.ts`, `shared/{api,net}/`, `bench/core.ts:12`\n```sh\nnode tools/x.js\n```\n`npm run x`";
    expect(repoPaths(md)).toEqual(["services/gateway/routes.ts", "bench/core.ts"]);
  });

  it("refuses a broken link, a missing anchor and a link into a missing folder", () => {
    const dir = mkdtempSync(join(tmpdir(), "wfp-docs-"));
    try {
      mkdirSync(join(dir, "sub"));
      writeFileSync(join(dir, "sub", "README.md"), "# Sub\n## Real heading\n");
      writeFileSync(
        join(dir, "page.md"),
        "[ok](sub/) [ok](sub/README.md#real-heading) [self](#top)\n# Top\n[gone](missing.md) [bad](sub/#no-such-heading) [dir](nope/)\n",
      );
      const problems = linkProblems(join(dir, "page.md"));
      expect(problems).toHaveLength(3);
      expect(problems[0]).toMatch(/page\.md:3 → missing\.md: no such file/);
      expect(problems[1]).toMatch(/sub\/#no-such-heading: no heading makes #no-such-heading/);
      expect(problems[2]).toMatch(/nope\/: no such file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("README.md and docs/", () => {
  it("the README is the way in: at most 200 lines", () => {
    expect(README.trimEnd().split("\n").length).toBeLessThanOrEqual(200);
  });

  it("holds no line a merge left unresolved", () => {
    const marked = FILES.filter((file) => /^(<{7}|>{7}) /m.test(read(file)));
    expect(marked).toEqual([]);
  });

  it("has the pages the README's map names", () => {
    expect(FILES).toEqual(expect.arrayContaining(["docs/README.md", "docs/getting-started.md", "docs/benchmarks.md"]));
  });

  it.each(FILES)("%s: every relative link resolves, anchors included", (file) => {
    expect(linkProblems(join(ROOT, file))).toEqual([]);
  });

  it.each(FILES)("%s: every repository path it names in code exists", (file) => {
    const missing = repoPaths(read(file)).filter((path) => !existsSync(join(ROOT, path)));
    expect({ file, missing }).toEqual({ file, missing: [] });
  });

  it.each(FILES)("%s: every json block parses, and every marker stands before a code block", (file) => {
    const md = read(file);
    for (const block of codeBlocks(md).filter((b) => b.lang === "json")) {
      expect({ file, line: block.line, parses: parses(block.code) }).toEqual({ file, line: block.line, parses: true });
    }
    const marked = new Set(codeBlocks(md).flatMap((b) => (b.marker ? [b.marker] : [])));
    for (const { marker, line } of markers(md)) expect({ file, line, marker, before: marked.has(marker) }).toMatchObject({ before: true });
  });

  it("agrees with the code: every error code, scope, system event type, step type and route is documented", () => {
    const conventions = read("docs/api-conventions.md");
    for (const [code, { status }] of Object.entries(ERROR_CODES)) {
      const row = conventions.split("\n").find((l) => l.startsWith("| ") && l.includes(`\`${code}\``));
      expect({ code, row: row?.includes(String(status)) ?? false }).toEqual({ code, row: true });
    }
    const concepts = read("docs/concepts.md");
    for (const scope of SCOPE_NAMES) expect({ scope, row: concepts.includes(`| \`${scope}\` |`) }).toEqual({ scope, row: true });
    for (const type of Object.keys(SYSTEM_EVENT_TYPES))
      expect({ type, row: concepts.includes(`| \`${type}\` |`) }).toEqual({ type, row: true });
    const workflows = anchorsOf(read("docs/workflows/README.md"));
    for (const type of [...STEP_TYPES, "manual-trigger", "event-trigger"])
      expect({ type, section: workflows.has(type) }).toEqual({ type, section: true });
    // Every route's path, under its own last segments, in the scope table (`…/approve` stands for the run's actions).
    const scopeTable = concepts.split("## Scopes")[1].split("\n## ")[0];
    for (const route of ROUTES) {
      const tail = route.path.split("/").slice(-1)[0];
      const written = scopeTable.includes(route.path) || scopeTable.includes(`…/${tail}`);
      expect({ route: `${route.method} ${route.path}`, written }).toEqual({ route: `${route.method} ${route.path}`, written: true });
    }
  });

  it("benchmarks.md names, in each section with a table, the command that prints it, and the command exists", () => {
    const scripts = Object.keys(JSON.parse(read("package.json")).scripts as Record<string, string>);
    const sections = read("docs/benchmarks.md").split(/^## /m).slice(1);
    expect(sections.length).toBeGreaterThanOrEqual(5);
    for (const section of sections) {
      if (!/^\|/m.test(section)) continue;
      const title = section.split("\n")[0];
      const command = /^Prints it: `([^`]+)`/m.exec(section)?.[1];
      expect({ title, command: command !== undefined }).toEqual({ title, command: true });
      const script = /^npm run (\S+)/.exec(command as string)?.[1];
      const built = /node dist\/(bench\/[\w-]+)\.js/.exec(command as string)?.[1];
      const jestFile = /npx jest .*?(test\/\S+\.test\.ts)/.exec(command as string)?.[1];
      const exists = script
        ? scripts.includes(script)
        : built
          ? existsSync(join(ROOT, `${built}.ts`))
          : jestFile
            ? existsSync(join(ROOT, jestFile))
            : false;
      expect({ title, command, exists }).toEqual({ title, command, exists: true });
    }
  });
});

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The platform the examples are sent to: local targets allowed (as the quickstart starts it), secrets on. */
let p: Platform;
let org: TestOrg;
beforeAll(async () => {
  p = await startPlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", SECRETS_KEYS: `k1:${randomBytes(32).toString("base64")}` });
  org = await p.createOrg("Docs");
});
afterAll(() => p?.stop());

describe("the examples marked for a running platform", () => {
  const marked = FILES.filter((file) => codeBlocks(read(file)).some((b) => b.lang === "json" && b.marker));
  it("there are some", () => expect(marked.length).toBeGreaterThanOrEqual(3));

  it.each(marked)("%s: each workflow is created (201) and each request answers 2xx", async (file) => {
    // Ids of the last resources the file's examples created, for `{workflow_id}`, `{webhook_id}`, `{run_id}`.
    const last: Record<string, string> = {};
    for (const block of codeBlocks(read(file)).filter((b) => b.lang === "json" && b.marker)) {
      // A body may name an earlier example's resource as `"{workflow_id}"` (a run_workflow step's target).
      const body = JSON.parse(
        block.code.replace(/"\{(workflow_id|webhook_id|run_id)\}"/g, (_, name: string) => {
          expect({ file, line: block.line, placeholder: name, known: name in last }).toMatchObject({ known: true });
          return JSON.stringify(last[name]);
        }),
      );
      const marker = block.marker as string;
      let method: string;
      let path: string;
      if (marker === "workflow") [method, path] = ["POST", "/workflows"];
      else {
        const m = /^request (GET|POST|PATCH|PUT|DELETE) \/v1(\/\S*)$/.exec(marker);
        expect({ file, line: block.line, marker, valid: m !== null }).toMatchObject({ valid: true });
        method = (m as RegExpExecArray)[1];
        path = (m as RegExpExecArray)[2].replace(/\{(\w+)\}/g, (_, name: string) => {
          expect({ file, line: block.line, placeholder: name, known: name in last }).toMatchObject({ known: true });
          return last[name];
        });
      }
      const res = await api(p.baseUrl, method, path, { key: org.test, body });
      const ok = marker === "workflow" ? res.status === 201 : res.status >= 200 && res.status < 300;
      expect({ file, line: block.line, marker, status: res.status, ok }).toEqual({
        file,
        line: block.line,
        marker,
        status: res.status,
        ok: true,
        ...(ok ? {} : { error: res.body?.error }),
      });
      const made = res.body?.data;
      if (made?.object === "workflow") last.workflow_id = made.id;
      if (made?.object === "webhook") last.webhook_id = made.id;
      if (made?.object === "run") last.run_id = made.id;
    }
  });
});

describe("the README's quickstart, as written", () => {
  const run = promisify(execFile);
  let receiver: Receiver | undefined;
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "wfp-quickstart-"));
  });
  afterAll(async () => {
    await receiver?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The README's curl commands (continuation lines joined), in order. */
  const curls = codeBlocks(README)
    .filter((b) => b.lang === "sh")
    .flatMap((b) => b.code.replace(/\\\n\s*/g, "").split("\n"))
    .filter((line) => line.startsWith("curl "));
  const one = (what: string, test: (line: string) => boolean): string => {
    const found = curls.filter(test);
    expect({ what, found: found.length }).toEqual({ what, found: 1 });
    return found[0];
  };

  it("starts the server for local receivers with the setting the SSRF guard's refusal names", async () => {
    expect(README).toContain("WEBHOOK_ALLOW_PRIVATE_TARGETS=true npm start");
    const plain = await startPlatform();
    try {
      const { test } = await plain.createOrg("Defaults");
      const res = await api(plain.baseUrl, "POST", "/webhooks", { key: test, body: { url: "http://localhost:4242/hooks", events: ["*"] } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "url_not_allowed", param: "url" });
      expect(res.body.error.message).toContain("WEBHOOK_ALLOW_PRIVATE_TARGETS=true");
      expect(res.body.error.message).toContain("local use");
    } finally {
      await plain.stop();
    }
  });

  it("registers the webhook, and the receiver verifies a real delivery, then a workflow's event; it refuses tampered requests", async () => {
    const block = codeBlocks(README).find((b) => b.marker === "receiver");
    expect(block?.lang).toBe("js");
    expect(README).toMatch(/WEBHOOK_SECRET=whsec_… node receiver\.mjs/);
    const port = await freePort();
    writeFileSync(join(dir, "receiver.mjs"), (block as { code: string }).code.replaceAll("4242", String(port)));

    const baseUrl = p.baseUrl.replace(/\/v1$/, "");
    const sh = async (line: string, env: Record<string, string> = {}) => {
      const cmd = line.replaceAll("http://localhost:3000", baseUrl).replaceAll("localhost:4242", `localhost:${port}`);
      const { stdout } = await run("bash", ["-c", cmd], { env: { ...process.env, KEY: org.live, ...env } });
      return JSON.parse(stdout);
    };

    const webhook = await sh(one("register the webhook", (l) => l.includes("/v1/webhooks ")));
    expect(webhook.data).toMatchObject({ object: "webhook", url: `http://localhost:${port}/hooks`, events: ["*"] });
    expect(webhook.data.secret).toMatch(/^whsec_/);

    receiver = new Receiver(process.execPath, [join(dir, "receiver.mjs")], webhook.data.secret);
    await receiver.waitFor(/^listening on http:\/\/localhost:\d+\/hooks$/);

    const emitted = await sh(one("emit an event", (l) => l.includes("/v1/events ")));
    expect(emitted.data).toMatchObject({ object: "event", type: "order.created" });
    await receiver.waitFor(new RegExp(`^verified order\\.created ${emitted.data.id} \\{"order":"o_1","total":42\\}$`));

    await expectTamperedRefused(receiver, port, webhook.data.secret);

    const workflow = await sh(one("create the workflow", (l) => l.includes("/v1/workflows ")));
    expect(workflow.data).toMatchObject({ object: "workflow", status: "active", trigger: { type: "manual" } });
    const WF = workflow.data.id as string;
    const started = await sh(
      one("start a run", (l) => l.includes("/runs ") && l.includes(" -d ")),
      { WF },
    );
    expect(started.data).toMatchObject({ object: "run", workflow_id: WF });
    await receiver.waitFor(/^verified order\.shipped evt_\w+ \{"order":"o_1"\}$/);
    const list = one("list the runs", (l) => l.includes("/runs ") && !l.includes(" -d "));
    await waitFor("the run succeeded", async () => (await sh(list, { WF })).data[0]?.status === "succeeded");
    const runs = await sh(list, { WF });
    expect(runs.data[0]).toMatchObject({ id: started.data.id, status: "succeeded" });
    expect(runs.data[0].steps[0].output.event_id).toMatch(/^evt_/);
    await receiver.waitFor(new RegExp(`^verified workflow\\.completed evt_\\w+ .*"run_id":"${started.data.id}"`));
  });

  const python = spawnSync("python3", ["--version"]).status === 0;
  (python ? it : it.skip)("the Python receiver of docs/webhooks.md verifies a real delivery and refuses tampered ones", async () => {
    const block = codeBlocks(read("docs/webhooks.md")).find((b) => b.marker === "receiver python");
    expect(block?.lang).toBe("python");
    const port = await freePort();
    writeFileSync(join(dir, "receiver.py"), (block as { code: string }).code.replaceAll("4242", String(port)));
    const created = await api(p.baseUrl, "POST", "/webhooks", {
      key: org.test,
      body: { url: `http://127.0.0.1:${port}/hooks`, events: ["invoice.paid"] },
    });
    expect(created.status).toBe(201);
    const py = new Receiver("python3", ["-u", join(dir, "receiver.py")], created.body.data.secret);
    try {
      await waitFor("the Python receiver listens", async () => {
        try {
          return (await request(`http://127.0.0.1:${port}/hooks`, { method: "POST", body: "{}" })).statusCode === 400;
        } catch {
          return false;
        }
      });
      const event = await api(p.baseUrl, "POST", "/events", { key: org.test, body: { type: "invoice.paid", data: { amount: 7 } } });
      await py.waitFor(new RegExp(`^verified invoice\\.paid ${event.body.data.id} \\{"amount": 7\\}$`));
      await expectTamperedRefused(py, port, created.body.data.secret);
    } finally {
      await py.stop();
    }
  });
  if (!python) console.warn("docs.test.ts: python3 is not installed; the Python receiver was not run");
});
