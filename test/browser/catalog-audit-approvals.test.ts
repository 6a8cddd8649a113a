/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The event catalog, an event's deliveries with Redeliver, a test send of a chosen type and payload, the audit
 * log and the approvals waiting, each in a real headless Chromium against the whole platform, at
 * 1280 px and at 390 px (where nothing may stick out past the screen). Screenshots land in
 * test-artifacts/dashboard/ as 40-* (desktop) and 41-* (phone).
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
let browser: Browser;
let desk: Page;
let phone: Page;
let receiver: Receiver;
const problems: string[] = [];
const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.test, body });

jest.setTimeout(90_000);

async function signedIn(width: number, height: number): Promise<Page> {
  const page = await (
    await browser.newContext({ viewport: { width, height }, ...(width < 500 && { isMobile: true, hasTouch: true }) })
  ).newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  await page.goto(dashboard(""));
  await page.getByLabel("Test key").fill(suite.acme.test);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Workflows" }).waitFor();
  return page;
}

beforeAll(async () => {
  receiver = await startReceiver();
  browser = await launchChromium();
  desk = await signedIn(1280, 900);
  phone = await signedIn(390, 844);
});
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
});
afterEach(() => expect(problems).toEqual([]));

/** What sticks out past the viewport's right edge outside a table's or a code block's own scrolling frame. */
const overflow = (page: Page) =>
  page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const wide = Array.from(document.querySelectorAll<HTMLElement>("body *"))
      .filter((el) => !el.parentElement?.closest(".table-wrap, pre"))
      .map((el) => ({ el, right: el.getBoundingClientRect().right }))
      .filter(({ right }) => right > width + 0.5)
      .map(({ el, right }) => `${el.tagName.toLowerCase()}.${el.className} → ${Math.round(right)}`);
    return { scrollWidth: document.documentElement.scrollWidth, width, wide: wide.slice(0, 5) };
  });

/** The same page at 390 px: screenshot, and nothing wider than the screen. */
async function onPhone(hash: string, ready: (page: Page) => Promise<unknown>, shot: string) {
  await phone.goto(dashboard(hash));
  await ready(phone);
  await screenshot(phone, shot);
  expect(await overflow(phone)).toEqual({ scrollWidth: 390, width: 390, wide: [] });
}

let webhookId: string;
let eventId: string;

describe("events", () => {
  beforeAll(async () => {
    const wh = await call("POST", "/webhooks", { url: receiver.url("/orders"), events: ["order.created", "approval.requested"] });
    expect(wh.status).toBe(201);
    webhookId = wh.body.data.id;
    receiver.setSecret("/orders", wh.body.data.secret);
    const evt = await call("POST", "/events", {
      type: "order.created",
      data: { sku: "A-1", qty: 2, note: "first order of the catalog test" },
    });
    expect(evt.status).toBe(201);
    eventId = evt.body.data.id;
    await receiver.waitFor(() => receiver.byPath("/orders").length === 1);
  });

  it("the catalog lists every type with its description and shows a type's newest payload", async () => {
    await desk.goto(dashboard("#/events"));
    await desk.getByRole("link", { name: "Event catalog" }).click();
    const system = desk.getByRole("listitem", { name: "workflow.completed", exact: true });
    await system.waitFor();
    await expect(system.locator(".chip").textContent()).resolves.toBe("system");
    await system.getByText(/^A run ended: workflow_id, run_id, status/).waitFor();
    const custom = desk.getByRole("listitem", { name: "order.created", exact: true });
    await expect(custom.locator(".chip").textContent()).resolves.toBe("custom");

    await custom.getByText("Example payload").click();
    const example = desk.getByLabel("Example payload of order.created");
    await example.waitFor();
    expect(JSON.parse((await example.textContent())!)).toEqual({ sku: "A-1", qty: 2, note: "first order of the catalog test" });
    const disabled = desk.getByRole("listitem", { name: "webhook.disabled", exact: true });
    await disabled.getByText("Example payload").click();
    await disabled.getByText("No webhook.disabled event in test yet.").waitFor();
    await screenshot(desk, "40-event-catalog");

    await onPhone(
      "#/events/types",
      async (page) => {
        await page.getByRole("listitem", { name: "order.created", exact: true }).getByText("Example payload").click();
        await page.getByLabel("Example payload of order.created").waitFor();
      },
      "41-event-catalog",
    );
  });

  it("an event's page lists its deliveries, and Redeliver sends one again", async () => {
    await desk.goto(dashboard(`#/events/${eventId}`));
    const row = desk.getByRole("list", { name: "Deliveries of this event" }).getByRole("listitem", { name: `Delivery to ${webhookId}` });
    await row.getByText("succeeded").waitFor();
    await expect(row.locator("[data-attempts]").textContent()).resolves.toBe("1 attempt · HTTP 200");
    await screenshot(desk, "40-event-deliveries");

    await row.getByRole("button", { name: /^Redeliver del_/ }).click();
    await receiver.waitFor(() => receiver.byPath("/orders").length === 2);
    const [first, again] = receiver.byPath("/orders");
    expect(again!.json).toEqual(first!.json);
    expect(again!.verified).toBe(true);
    await row.locator("[data-attempts]", { hasText: "2 attempts · HTTP 200" }).waitFor();
    await screenshot(desk, "40-event-deliveries-redelivered");

    await onPhone(
      `#/events/${eventId}`,
      (page) => page.getByRole("list", { name: "Deliveries of this event" }).getByText("succeeded").waitFor(),
      "41-event-deliveries",
    );
  });

  it("a test send takes the type chosen among the webhook's", async () => {
    await desk.goto(dashboard(`#/webhooks/${webhookId}`));
    const form = desk.getByRole("form", { name: "Test event" });
    await form.getByLabel("Test event of type").selectOption("approval.requested");
    await form.getByRole("button", { name: "Send test event" }).click();
    await desk
      .getByRole("status")
      .filter({ hasText: /^Test approval\.requested sent: delivery del_/ })
      .waitFor();
    await receiver.waitFor(() => receiver.byPath("/orders").length === 3);
    const sent = receiver.byPath("/orders")[2]!.json;
    expect({ type: sent.type, test: sent.test, step_id: sent.data.step_id }).toEqual({
      type: "approval.requested",
      test: true,
      step_id: "approve",
    });
    await screenshot(desk, "40-webhook-test-send");

    await onPhone(`#/webhooks/${webhookId}`, (page) => page.getByRole("form", { name: "Test event" }).waitFor(), "41-webhook-test-send");
  });
});

describe("the audit log", () => {
  it("lists the changes newest first and filters by action", async () => {
    await desk.goto(dashboard("#/audit"));
    const rows = desk.getByRole("list", { name: "Changes" }).getByRole("listitem");
    await rows.filter({ hasText: "webhook.created" }).first().waitFor();
    await expect(rows.filter({ hasText: "delivery.redelivered" }).count()).resolves.toBe(1);
    await screenshot(desk, "40-audit-log");

    await desk.getByLabel("Filter by").selectOption("action");
    await desk.getByLabel("Value").fill("webhook.tested");
    await desk.getByRole("button", { name: "Filter", exact: true }).click();
    await waitFor("only webhook.tested entries", async () => (await rows.count()) === 1);
    await expect(rows.first().locator("code").first().textContent()).resolves.toBe("webhook.tested");
    await rows.first().getByText("POST /webhooks/{id}/test").waitFor();

    await onPhone(
      "#/audit",
      (page) => page.getByRole("list", { name: "Changes" }).getByText("webhook.created").first().waitFor(),
      "41-audit-log",
    );
  });
});

// After the audit log, which counts the one test send above.
describe("a test send's payload", () => {
  it("a test send's payload starts as the type's example, is edited as JSON, and bad JSON is refused in place", async () => {
    await desk.goto(dashboard(`#/webhooks/${webhookId}`));
    const form = desk.getByRole("form", { name: "Test event" });
    const field = form.getByLabel("Payload data");
    const payloadIs = (want: unknown) =>
      waitFor(`the payload ${JSON.stringify(want)}`, async () => {
        try {
          return JSON.stringify(JSON.parse(await field.inputValue())) === JSON.stringify(want);
        } catch {
          return false;
        }
      });
    // A custom type: the newest stored event's data; a system type: its example.
    await form.getByLabel("Test event of type").selectOption("order.created");
    await payloadIs({ sku: "A-1", qty: 2, note: "first order of the catalog test" });
    await form.getByLabel("Test event of type").selectOption("approval.requested");
    await payloadIs({ workflow_id: "wf_example", run_id: "run_example", step_id: "approve", message: "Example approval" });
    await form.getByLabel("Test event of type").selectOption("order.created");
    await payloadIs({ sku: "A-1", qty: 2, note: "first order of the catalog test" });

    const before = receiver.byPath("/orders").length;
    const logged = async () => (await call("GET", `/webhooks/${webhookId}/deliveries?per_page=100`)).body.data.length;
    const deliveries = await logged();
    await field.fill('{"sku": "B-2",');
    await form.getByRole("button", { name: "Send test event" }).click();
    await form.getByText(/^Not valid JSON/).waitFor();
    await expect(field.getAttribute("aria-invalid")).resolves.toBe("true");
    await screenshot(desk, "40-webhook-test-send-invalid");
    await field.fill('["not", "an object"]');
    await form.getByRole("button", { name: "Send test event" }).click();
    await form.getByText("Must be a JSON object ({…})").waitFor();

    const data = { sku: "B-2", qty: 5, lines: [{ n: 1 }], gift: null };
    await field.fill(JSON.stringify(data, null, 2));
    await form.getByRole("button", { name: "Send test event" }).click();
    await desk
      .getByRole("status")
      .filter({ hasText: /^Test order\.created sent: delivery del_/ })
      .waitFor();
    await expect(field.getAttribute("aria-invalid")).resolves.toBeNull();
    await receiver.waitFor(() => receiver.byPath("/orders").length === before + 1);
    const sent = receiver.byPath("/orders")[before]!;
    expect(sent.verified).toBe(true);
    expect({ type: sent.json.type, test: sent.json.test, data: sent.json.data }).toEqual({ type: "order.created", test: true, data });
    // The refused texts sent nothing: one delivery more, the one above.
    await expect(logged()).resolves.toBe(deliveries + 1);
    expect(receiver.byPath("/orders")).toHaveLength(before + 1);

    await onPhone(
      `#/webhooks/${webhookId}`,
      (page) => page.getByRole("form", { name: "Test event" }).getByLabel("Payload data").waitFor(),
      "41-webhook-test-send-payload",
    );
  });
});

describe("approvals waiting", () => {
  it("lists runs waiting at an approval, with Approve and Reject from the list", async () => {
    const wf = await call("POST", "/workflows", {
      name: "Refunds",
      trigger: { type: "manual" },
      steps: [
        { id: "ask", type: "approval", message: "Refund {{input.amount}} EUR to {{input.who}}?" },
        { id: "done", type: "emit", event_type: "refund.sent", data: {} },
      ],
    });
    const runs: string[] = [];
    for (const [amount, who] of [
      [40, "Ada"],
      [9000, "Mallory"],
    ] as const) {
      const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, { input: { amount, who } });
      runs.push(run.body.data.id);
    }
    await desk.goto(dashboard("#/approvals"));
    const ada = desk.getByRole("listitem", { name: `Approval of ${runs[0]}` });
    const mallory = desk.getByRole("listitem", { name: `Approval of ${runs[1]}` });
    await ada.getByText("Refund 40 EUR to Ada?").waitFor();
    await mallory.getByText("Refund 9000 EUR to Mallory?").waitFor();
    await screenshot(desk, "40-approvals");
    await onPhone("#/approvals", (page) => page.getByText("Refund 9000 EUR to Mallory?").waitFor(), "41-approvals");

    await ada.getByRole("button", { name: "Approve" }).click();
    await desk.getByRole("dialog").getByLabel("Comment (optional)").fill("Receipt checked");
    await desk.getByRole("dialog").getByRole("button", { name: "Approve" }).click();
    await ada.waitFor({ state: "detached" });
    await mallory.getByRole("button", { name: "Reject" }).click();
    await desk.getByRole("dialog").getByRole("button", { name: "Reject" }).click();
    await desk.getByText("No run in test waits for an approval.").waitFor();

    const read = async (id: string) => (await call("GET", `/workflows/${wf.body.data.id}/runs/${id}`)).body.data;
    await waitFor(
      "both runs to finish",
      async () => (await read(runs[0]!)).status === "succeeded" && (await read(runs[1]!)).status === "failed",
    );
    expect((await read(runs[0]!)).steps[0].decision).toMatchObject({ decision: "approved", comment: "Receipt checked" });
    expect((await read(runs[1]!)).steps[0].decision).toMatchObject({ decision: "rejected" });
  });
});
