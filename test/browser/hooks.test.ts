/// <reference lib="dom" />
import { createHmac } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * A webhook-triggered workflow in the dashboard: created there, it shows the hook's secret once
 * after the signing secret, and its page the hook's address and what it received.
 */
const suite = usePlatform();
let browser: Browser;
let page: Page;
const problems: string[] = [];

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
  page = await (await browser.newContext()).newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
});
afterAll(async () => {
  await browser?.close();
});
afterEach(() => expect(problems).toEqual([]));

describe("a webhook trigger in the dashboard", () => {
  it("shows the hook secret once, then the hook's URL and its counts", async () => {
    await page.goto(`${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/`);
    await page.getByLabel("Live key").fill(suite.acme.live);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("link", { name: "Workflows" }).click();
    await page.getByRole("button", { name: "New workflow" }).click();
    const definition = {
      name: "GitHub pushes",
      trigger: { type: "webhook", verify: { scheme: "github" } },
      steps: [{ id: "note", type: "set", output: { ref: "{{ input.request.body.ref }}" } }],
    };
    await page.getByLabel(/Definition/).fill(JSON.stringify(definition));
    await page.getByRole("button", { name: "Create workflow" }).click();
    await expect(page.getByRole("textbox", { name: "Signing secret of “GitHub pushes”" }).inputValue()).resolves.toMatch(/^whsec_/);
    await page.getByRole("button", { name: "I have saved it" }).click();
    const hookSecret = page.getByRole("textbox", { name: /^Hook secret of “GitHub pushes” \(POST \/v1\/hooks\/hk_/ });
    const secret = await hookSecret.inputValue();
    expect(secret).toMatch(/^whsec_/);
    await page.getByRole("button", { name: "I have saved it" }).click();
    await page.getByRole("heading", { name: "GitHub pushes" }).waitFor();

    const id = page.url().split("/").pop()!;
    const wf = (await api(suite.p.baseUrl, "GET", `/workflows/${id}`, { key: suite.acme.live })).body.data;
    const raw = JSON.stringify({ ref: "refs/heads/main" });
    const sign = (key: string) => ({
      "content-type": "application/json",
      "x-hub-signature-256": `sha256=${createHmac("sha256", key).update(raw).digest("hex")}`,
    });
    const path = wf.hook.url.replace(/^\/v1/, "");
    expect((await api(suite.p.baseUrl, "POST", path, { raw, headers: sign(secret) })).status).toBe(202);
    expect((await api(suite.p.baseUrl, "POST", path, { raw, headers: sign("forged") })).status).toBe(401);
    await waitFor("the counts to be stored", async () => {
      const got = (await api(suite.p.baseUrl, "GET", `/workflows/${id}`, { key: suite.acme.live })).body.data.hook;
      return got.accepted === 1 && got.refused === 1;
    });
    await page.reload();
    const hook = page.locator("dd", { hasText: wf.hook.url });
    await expect(hook.textContent()).resolves.toBe(
      `${wf.hook.url} · 1 accepted, 0 duplicates, 0 filtered, 1 refused (last: bad_signature)`,
    );
    await expect(page.locator("dd", { hasText: "inbound webhook (github)" }).count()).resolves.toBe(1);
    await screenshot(page, "hooks-workflow");
  });
});
