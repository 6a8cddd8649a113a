/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, newPage, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * A webhook's page in a real headless Chromium against the whole platform: its health in detail
 * (the last error an attempt met, why it was disabled), the delivery log's filters, editing and
 * deleting the endpoint. Screenshots at desktop and phone width land in test-artifacts/dashboard/.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WEBHOOK_RETRY_DELAYS_MS: "60000,60000,60000,60000" });
let rx: Receiver;
let browser: Browser;
let page: Page;
const problems: string[] = [];
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });
const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const shown = () => page.locator("li.delivery").evaluateAll((items) => items.map((li) => (li as HTMLElement).dataset.delivery));

jest.setTimeout(90_000);

let hook: { id: string; url: string; secret: string };
/** Deliveries by event type, oldest first. */
const deliveries: Record<string, { id: string; event_id: string }[]> = {};

beforeAll(async () => {
  [rx, browser] = await Promise.all([startReceiver(), launchChromium()]);
  page = await newPage(browser, problems);
  hook = (await call("POST", "/webhooks", { url: rx.url("/shop"), events: ["order.created", "order.paid"], description: "Shop" })).body
    .data;
  rx.setSecret("/shop", hook.secret);
  // Orders are refused (the first retry is a minute away), payments accepted.
  rx.behave("/shop", (n) => (n <= 2 ? { status: 503, body: "maintenance" } : { status: 200 }));
  for (const type of ["order.created", "order.created", "order.paid"]) {
    expect((await call("POST", "/events", { type, data: {} })).status).toBe(201);
    await waitFor("the attempt", async () => (await call("GET", `/webhooks/${hook.id}/deliveries`)).body.data[0]?.attempts.length > 0);
  }
  for (const d of [...(await call("GET", `/webhooks/${hook.id}/deliveries`)).body.data].reverse())
    (deliveries[d.event_type] ??= []).push({ id: d.id, event_id: d.event_id });

  await page.goto(dashboard(""));
  await page.getByLabel("Live key").fill(suite.acme.live);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Webhooks" }).waitFor();
});
afterAll(() => Promise.all([browser?.close(), rx?.close()]));
afterEach(() => expect(problems).toEqual([]));

describe("a webhook's page", () => {
  it("shows its health in detail: the last attempt, the last error and the last 24 hours", async () => {
    await page.goto(dashboard(`#/webhooks/${hook.id}`));
    const health = page.getByRole("region", { name: "Health" });
    await health.waitFor();
    await page.locator("[data-last-error]").getByText("the receiver answered 503").waitFor();
    expect(await health.textContent()).toContain("1 of 3 attempts succeeded (33.3 %)");
    await screenshot(page, "webhook-manage-desktop");
  });

  it("filters the delivery log by event type, event id, delivery id and creation time", async () => {
    await page.goto(dashboard(`#/webhooks/${hook.id}`));
    await page.locator("li.delivery").first().waitFor();
    expect((await shown()).length).toBe(3);

    await page.getByLabel("Event type").fill("order.paid");
    await page.getByLabel("Event type").press("Enter");
    await waitFor("only the payment", async () => (await shown()).join() === deliveries["order.paid"].map((d) => d.id).join());

    await page.getByRole("button", { name: "Clear filters" }).click();
    await page.getByLabel("Event id").fill(deliveries["order.created"][0].event_id);
    await page.getByLabel("Event id").press("Enter");
    await waitFor("only the first order", async () => (await shown()).join() === deliveries["order.created"][0].id);

    await page.getByRole("button", { name: "Clear filters" }).click();
    await page.getByLabel("Delivery id").fill(deliveries["order.created"][1].id);
    await page.getByLabel("Delivery id").press("Enter");
    await waitFor("only the second order", async () => (await shown()).join() === deliveries["order.created"][1].id);

    await page.getByRole("button", { name: "Clear filters" }).click();
    await page.getByLabel("Created from").fill("2099-01-01T00:00");
    await page.getByLabel("Created from").press("Enter");
    await page.getByText("No deliveries match these filters.").waitFor();
    await page.getByLabel("Created from").fill("2000-01-01T00:00");
    await page.getByLabel("Created before").fill("2099-01-01T00:00");
    await page.getByLabel("Created before").press("Enter");
    await waitFor("all three again", async () => (await shown()).length === 3);
    await page.getByRole("button", { name: "Clear filters" }).click();
  });

  it("edits the endpoint and says why it is disabled", async () => {
    await page.goto(dashboard(`#/webhooks/${hook.id}`));
    await page.getByRole("button", { name: "Edit" }).click();
    const form = page.getByRole("form", { name: "Edit endpoint" });
    await form.getByLabel("Description").fill("Shop, payments only");
    await form.getByLabel("Event types").fill("order.paid");
    await form.getByLabel(/Rate limit/).fill("5");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Shop, payments only").waitFor();
    expect((await call("GET", `/webhooks/${hook.id}`)).body.data).toMatchObject({
      description: "Shop, payments only",
      events: ["order.paid"],
      rate_limit: 5,
      url: hook.url,
    });

    await page.getByRole("button", { name: "Disable" }).click();
    await page.getByText("Why it is disabled: disabled through the API").waitFor();
  });

  it("deletes the endpoint after a confirmation", async () => {
    await page.goto(dashboard(`#/webhooks/${hook.id}`));
    await page.getByRole("button", { name: "Delete" }).click();
    const dialog = page.getByRole("dialog");
    expect(await dialog.textContent()).toContain(hook.url);
    await screenshot(page, "webhook-delete-desktop");
    await dialog.getByRole("button", { name: "Delete endpoint" }).click();
    await page.getByRole("heading", { name: "Webhooks" }).waitFor();
    expect((await call("GET", `/webhooks/${hook.id}`)).status).toBe(404);
  });

  it("fits a phone's width", async () => {
    const other = (await call("POST", "/webhooks", { url: rx.url("/phone"), events: ["order.created"] })).body.data;
    const phone = await (await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true })).newPage();
    phone.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    await phone.goto(dashboard(""));
    await phone.getByLabel("Live key").fill(suite.acme.live);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.getByRole("link", { name: "Webhooks" }).waitFor();
    await phone.goto(dashboard(`#/webhooks/${other.id}`));
    await phone.getByRole("region", { name: "Health" }).waitFor();
    await phone.getByRole("button", { name: "Edit" }).click();
    await screenshot(phone, "webhook-manage-phone");
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBe(390);
    await phone.context().close();
  });
});
