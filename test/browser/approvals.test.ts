/// <reference lib="dom" />
import { createServer, type Server } from "node:http";
import type { Browser, Page } from "playwright-core";
import { Webhook } from "standardwebhooks";
import { waitFor } from "../../tools/procs";
import { launchChromium, rotateSecret, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * The run page's approvals and second chances in a real headless Chromium against the whole
 * platform: the Approve dialog shows the run's message and takes a comment, the step shows who
 * decided and what they said, and a failed run has Retry and Rerun buttons that work; a workflow's
 * signing secret is shown once on creation and once more on rotation. Screenshots
 * land in test-artifacts/dashboard/.
 */

const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
let browser: Browser;
let page: Page;
/** An http step target on 127.0.0.1 that fails its first request (503) and then succeeds. */
let target: Server;
let hits = 0;
const problems: string[] = [];

const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  target = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      hits += 1;
      res.writeHead(hits === 1 ? 503 : 200, { "content-type": "application/json" }).end(`{"hit":${hits}}`);
    });
  });
  await new Promise<void>((ok) => target.listen(0, "127.0.0.1", ok));
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  await signIn(page, dashboard(""), { live: suite.acme.live, test: suite.acme.test });
});

afterAll(async () => {
  await browser?.close();
  target?.closeAllConnections();
  await new Promise((ok) => target?.close(ok));
});

afterEach(() => expect(problems).toEqual([]));

async function startedRun(steps: unknown[], input: Record<string, unknown>) {
  const wf = await call("POST", "/workflows", { name: "Payout approval", trigger: { type: "manual" }, steps });
  const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, { input });
  expect(run.status).toBe(201);
  return { wfId: wf.body.data.id as string, runId: run.body.data.id as string };
}

describe("the run page", () => {
  it("shows the approval's message in the dialog, takes a comment, and shows who approved", async () => {
    const me = (await call("GET", "/me")).body.data.api_key as { id: string; name: string };
    const { wfId, runId } = await startedRun([{ id: "ask", type: "approval", message: "Pay {{input.amount}} EUR to {{input.who}}?" }], {
      amount: 120,
      who: "Ada",
    });
    await page.goto(dashboard(`#/workflows/${wfId}/runs/${runId}`));
    await page.getByRole("status").filter({ hasText: "Pay 120 EUR to Ada?" }).waitFor();
    await page.getByRole("button", { name: "Approve" }).click();
    const dialog = page.getByRole("dialog");
    await expect(dialog.getByLabel("Approval message").textContent()).resolves.toBe("Pay 120 EUR to Ada?");
    await dialog.getByLabel("Comment (optional)").fill("Invoice 42 checked");
    await screenshot(page, "20-approve-dialog");
    await dialog.getByRole("button", { name: "Approve" }).click();

    const step = page.getByRole("listitem", { name: "Step ask: succeeded" });
    await step.waitFor();
    const note = step.getByRole("note");
    await expect(note.textContent()).resolves.toMatch(new RegExp(`^Approved by ${me.name} \\(${me.id}\\).*Invoice 42 checked$`));
    await screenshot(page, "21-run-approved");
    const stored = (await call("GET", `/workflows/${wfId}/runs/${runId}`)).body.data.steps[0].decision;
    expect(stored).toMatchObject({ decision: "approved", comment: "Invoice 42 checked", decided_by: { key_id: me.id, key_name: me.name } });
  });

  it("retries a failed run from its failed step, and reruns it as a new linked run", async () => {
    const url = `http://127.0.0.1:${(target.address() as { port: number }).port}/pay`;
    const { wfId, runId } = await startedRun([{ id: "pay", type: "http", method: "POST", url, retries: 0 }], {});
    await page.goto(dashboard(`#/workflows/${wfId}/runs/${runId}`));
    await page.getByRole("listitem", { name: "Step pay: failed" }).waitFor();
    await page.getByRole("button", { name: "Retry from the failed step" }).click();
    await page.getByRole("listitem", { name: "Step pay: succeeded" }).waitFor({ timeout: 15_000 });
    await page.getByRole("term").filter({ hasText: "Attempt" }).waitFor();
    await screenshot(page, "22-run-retried");
    expect(hits).toBe(2);
    await expect(page.getByRole("button", { name: "Retry from the failed step" }).count()).resolves.toBe(0);

    await page.getByRole("button", { name: "Rerun with the same input" }).click();
    await page.getByRole("link", { name: runId }).waitFor();
    await page.getByRole("listitem", { name: "Step pay: succeeded" }).waitFor({ timeout: 15_000 });
    const newId = /runs\/(run_[a-z0-9]+)/.exec(page.url())?.[1];
    expect(newId).toBeDefined();
    expect(newId).not.toBe(runId);
    expect((await call("GET", `/workflows/${wfId}/runs/${newId}`)).body.data).toMatchObject({ rerun_of: runId, status: "succeeded" });
    expect(hits).toBe(3);
  });
});

describe("the workflow's signing secret", () => {
  it("is shown once after creating a workflow, and again once after Rotate signing secret; both sign the step's request", async () => {
    const received: { headers: Record<string, string>; body: string }[] = [];
    const receiver = createServer((req, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (chunk: string) => (body += chunk));
      req.on("end", () => {
        received.push({ headers: req.headers as Record<string, string>, body });
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((ok) => receiver.listen(0, "127.0.0.1", ok));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/signed`;
      await page.goto(dashboard("#/workflows"));
      await page.getByRole("button", { name: "New workflow" }).click();
      const definition = { name: "Signed step", trigger: { type: "manual" }, steps: [{ id: "tell", type: "http", method: "POST", url }] };
      await page.getByLabel(/Definition/).fill(JSON.stringify(definition));
      await page.getByRole("button", { name: "Create workflow" }).click();
      const shown = page.getByRole("textbox", { name: "Signing secret of “Signed step”" });
      await shown.waitFor();
      const created = await shown.inputValue();
      expect(created).toMatch(/^whsec_/);
      await screenshot(page, "23-workflow-signing-secret");
      await page.getByRole("button", { name: "I have saved it" }).click();
      await page.getByRole("heading", { name: "Signed step" }).waitFor();
      // Shown once: the workflow's page does not hold it.
      expect(await page.content()).not.toContain(created);

      const rotated = await rotateSecret(page, "Rotate signing secret");
      expect(rotated).toMatch(/^whsec_/);
      expect(rotated).not.toBe(created);
      await screenshot(page, "24-workflow-secret-rotated");
      await page.getByRole("button", { name: "I have saved it" }).click();
      await expect(page.getByRole("textbox", { name: "New signing secret" }).count()).resolves.toBe(0);
      expect(await page.content()).not.toContain(rotated);

      // The two values the page showed are the workflow's real secrets: the new one signs, the old one still does (24 h).
      const wfId = /workflows\/(wf_[a-z0-9]+)/.exec(page.url())?.[1];
      expect((await call("POST", `/workflows/${wfId}/runs`, { input: {} })).status).toBe(201);
      await waitFor("the step's request", async () => received.length === 1);
      for (const secret of [rotated, created])
        expect(() => new Webhook(secret).verify(received[0].body, received[0].headers)).not.toThrow();
    } finally {
      receiver.closeAllConnections();
      await new Promise((ok) => receiver.close(ok));
    }
  });
});
