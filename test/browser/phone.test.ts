/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * The dashboard at a phone's width (390 px) in a real headless Chromium: no page is wider than the
 * screen, and signing in with a refused key says why without a "Signed out" notice.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
let browser: Browser;
const problems: string[] = [];
const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.test, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});
afterEach(() => expect(problems).toEqual([]));

async function phone(): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true })).newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  return page;
}

async function signIn(page: Page) {
  await page.goto(dashboard(""));
  await page.getByLabel("Test key").fill(suite.acme.test);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Workflows" }).waitFor();
}

/** What sticks out past the viewport's right edge (the widest, for the failure message), and the page's scroll width. */
const overflow = (page: Page) =>
  page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const wide = Array.from(document.querySelectorAll<HTMLElement>("body *"))
      // A table in its scrolling frame is meant to scroll sideways; what else sticks out widens the page.
      .filter((el) => !el.parentElement?.closest(".table-wrap, pre"))
      .map((el) => ({ el, right: el.getBoundingClientRect().right }))
      .filter(({ right }) => right > width + 0.5)
      .sort((a, b) => b.right - a.right)
      .slice(0, 5)
      .map(({ el, right }) => `${el.tagName.toLowerCase()}.${el.className} → ${Math.round(right)}`);
    return { scrollWidth: document.documentElement.scrollWidth, width, wide };
  });

describe("at 390 px", () => {
  it("a failed run's page fits the screen", async () => {
    const wf = await call("POST", "/workflows", {
      name: "A workflow with a rather long name for a phone",
      trigger: { type: "manual" },
      steps: [
        { id: "ask_for_the_payout_approval", type: "approval", message: "Pay out 1,250.00 EUR to the supplier's account?" },
        { id: "notify_the_accounting_system", type: "http", method: "POST", url: "http://127.0.0.1:1/a/very/long/path/to/an/endpoint" },
      ],
    });
    expect(wf.status).toBe(201);
    const run = (await call("POST", `/workflows/${wf.body.data.id}/runs`, { input: { amount: 1250, currency: "EUR" } })).body.data;
    await waitFor(
      "the run to wait",
      async () => (await call("GET", `/workflows/${wf.body.data.id}/runs/${run.id}`)).body.data.status === "waiting",
    );
    await call("POST", `/workflows/${wf.body.data.id}/runs/${run.id}/approve`, { comment: "Checked against the invoice." });
    await waitFor(
      "the run to fail",
      async () => (await call("GET", `/workflows/${wf.body.data.id}/runs/${run.id}`)).body.data.status === "failed",
      30_000,
    );

    const page = await phone();
    await signIn(page);
    await page.goto(dashboard(`#/workflows/${wf.body.data.id}/runs/${run.id}`));
    await page.getByRole("heading", { name: /^Run / }).waitFor();
    await page.getByText("Retry from the failed step").waitFor();
    await screenshot(page, "phone-run");
    const seen = await overflow(page);
    expect(seen).toEqual({ scrollWidth: 390, width: 390, wide: [] });

    for (const hash of [
      `#/workflows/${wf.body.data.id}`,
      "#/workflows",
      "#/runs",
      "#/bulk",
      "#/webhooks",
      "#/events",
      "#/keys",
      "#/usage",
    ]) {
      await page.goto(dashboard(hash));
      await page.locator("main h2").first().waitFor();
      await page.waitForLoadState("networkidle");
      expect({ hash, ...(await overflow(page)) }).toEqual({ hash, scrollWidth: 390, width: 390, wide: [] });
    }
    await page.context().close();
  });
});

describe("signing in", () => {
  it("with a refused key says why, and nothing about signing out", async () => {
    const page = await phone();
    await page.goto(dashboard(""));
    await page.getByLabel("Test key").fill("svc_test_notakey");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toMatch(/\S/);
    expect(await page.locator("main").textContent()).not.toContain("Signed out");
    await page.context().close();
  });
});
