import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { launchChromium, newPage } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The delivery log in a real headless Chromium against the whole platform: an attempt's request
 * and answer, "Retry now" on a pending delivery, and a recovery with its progress. Screenshots land
 * in test-artifacts/delivery-log/.
 */
const SHOTS = join(__dirname, "..", "..", "test-artifacts", "delivery-log");

// The first retry a minute away (the delivery stays pending), the others at once.
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WEBHOOK_RETRY_DELAYS_MS: "60000,10,10,10", WEBHOOK_TIMEOUT_MS: "2000" });
let rx: Receiver;
let browser: Browser;
let page: Page;
const problems: string[] = [];
const origin = () => suite.p.baseUrl.replace(/\/v1$/, "");
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });
const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

jest.setTimeout(60_000);

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  rx = await startReceiver();
  browser = await launchChromium();
  page = await newPage(browser, problems);
});
afterAll(async () => {
  await browser?.close();
  await rx?.close();
});

describe("the delivery log in the dashboard", () => {
  let webhookId: string;
  let eventId: string;

  it("shows an attempt's request and the receiver's answer: status, headers and body", async () => {
    const wh = (await call("POST", "/webhooks", { url: rx.url("/shop"), events: ["order.created"] })).body.data;
    webhookId = wh.id;
    rx.setSecret("/shop", wh.secret);
    rx.behave("/shop", () => ({ status: 500, body: '{"error":"db down"}', headers: { "x-trace": "t-42" } }));
    eventId = (await call("POST", "/events", { type: "order.created", data: { order_id: 7 } })).body.data.id;
    await rx.waitFor(() => rx.byPath("/shop").length === 1);

    await page.goto(`${origin()}/dashboard/`);
    await page.getByLabel("Live key").fill(suite.acme.live);
    await page.getByLabel("Live key").press("Enter");
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await page.goto(`${origin()}/dashboard/#/webhooks/${webhookId}`);
    const item = page.getByRole("listitem").filter({ hasText: eventId });
    await item.getByText("pending").waitFor();
    await item.locator("summary").click();
    const attempt = item.locator("[data-attempt='1']");
    await attempt.getByText("Response").waitFor();
    await expect(attempt.textContent()).resolves.toContain(rx.url("/shop"));
    await expect(attempt.locator("pre.response-body").textContent()).resolves.toBe('{"error":"db down"}');
    await expect(attempt.getByText("t-42").isVisible()).resolves.toBe(true);
    // Request headers without the signatures.
    await expect(attempt.getByText("webhook-id").isVisible()).resolves.toBe(true);
    await expect(attempt.getByText("webhook-signature").count()).resolves.toBe(0);
    await expect(item.locator("pre.request-body").textContent()).resolves.toContain('"order_id": 7');
    await shot("01-attempt-request-response");
  });

  it("retries a pending delivery at once", async () => {
    const item = page.getByRole("listitem").filter({ hasText: eventId });
    await item.getByRole("button", { name: "Retry now" }).click();
    // Sent now, not a minute later; the receiver still fails, so the series runs out.
    await rx.waitFor(() => rx.byPath("/shop").length === 5, 10_000);
    await item.getByText("5 attempts").waitFor({ timeout: 10_000 });
    await item.locator("[data-status='failed']").or(item.getByText("failed").first()).first().waitFor();
    await shot("02-retried-now");
  });

  it("recovers the failed deliveries since a time and shows the job's progress", async () => {
    rx.behave("/shop", () => ({ status: 200 }));
    await page.getByRole("button", { name: "Recover" }).click();
    const progress = page.locator("p.recovery");
    await progress.waitFor();
    await page.locator("p.recovery[data-recovery='succeeded']").waitFor({ timeout: 10_000 });
    await expect(progress.textContent()).resolves.toContain("1 of 1 redelivered");
    await rx.waitFor(() => rx.byPath("/shop").length === 6, 10_000);
    expect(rx.byPath("/shop")[5].json.id).toBe(eventId);
    await page.getByRole("listitem").filter({ hasText: eventId }).getByText("succeeded").waitFor({ timeout: 10_000 });
    await shot("03-recovered");
    expect(problems).toEqual([]);
  });
});
