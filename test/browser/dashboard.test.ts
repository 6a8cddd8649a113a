/// <reference lib="dom" />
// (page.evaluate callbacks run in the browser: their code sees the DOM.)
import { createServer, type Server } from "node:http";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { request } from "undici";
import { waitFor } from "../../tools/procs";
import { launchChromium, rotateSecret, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * The dashboard in a real headless Chromium (Debian's, driven by playwright-core) against the whole
 * platform: every click goes through the gateway's public /v1 API, webhooks reach a real receiver.
 * Screenshots of each page land in test-artifacts/dashboard/.
 */

const suite = usePlatform({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
  WEBHOOK_RETRY_DELAYS_MS: "100,100,100,100",
  WEBHOOK_TIMEOUT_MS: "2000",
});
let rx: Receiver;
/** The target of the workflow's http step: a plain server that records what it is sent. */
let target: Server;
const posted: unknown[] = [];
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** Console errors and uncaught errors: the dashboard must run clean (CSP included). */
const problems: string[] = [];
/** Every API answer of 400 or more that the page received. */
const refusals: string[] = [];

const origin = () => suite.p.baseUrl.replace(/\/v1$/, "");
const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });
const shot = (name: string) => screenshot(page, name);

jest.setTimeout(60_000);

beforeAll(async () => {
  rx = await startReceiver();
  target = createServer((req, res) => {
    let body = "";
    req
      .on("data", (c) => (body += c))
      .on("end", () => {
        posted.push(JSON.parse(body));
        res.writeHead(200, { "content-type": "application/json" }).end('{"refund":"ok"}');
      });
  });
  await new Promise<void>((ok) => target.listen(0, "127.0.0.1", ok));
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  // A failed load also logs to the console: those are checked one by one through `refusals`.
  page.on(
    "console",
    (msg) => msg.type() === "error" && !msg.text().startsWith("Failed to load resource") && problems.push(`console: ${msg.text()}`),
  );
  page.on(
    "response",
    (res) => res.status() >= 400 && refusals.push(`${res.status()} ${res.request().method()} ${new URL(res.url()).pathname}`),
  );
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
});

afterAll(async () => {
  await browser?.close();
  await rx?.close();
  target?.closeAllConnections();
  await new Promise((ok) => target?.close(ok));
});

describe("the dashboard is served by the gateway", () => {
  it("redirects /dashboard to /dashboard/ and serves the page with a strict content security policy", async () => {
    const bare = await request(`${origin()}/dashboard`);
    expect(bare.statusCode).toBe(308);
    expect(bare.headers.location).toBe("/dashboard/");
    await bare.body.dump();

    const index = await request(`${origin()}/dashboard/`);
    const html = await index.body.text();
    expect(index.statusCode).toBe(200);
    expect(index.headers["content-type"]).toMatch(/text\/html/);
    expect(index.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(index.headers["x-frame-options"]).toBe("DENY");
    expect(index.headers["cache-control"]).toBe("no-cache");

    const script = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await request(`${origin()}${script}`);
    expect(asset.statusCode).toBe(200);
    expect(asset.headers["content-type"]).toMatch(/javascript/);
    expect(asset.headers["cache-control"]).toContain("immutable");
    await asset.body.dump();
  });

  it("answers files it does not have, paths outside it and writes in the API's error shape", async () => {
    for (const [method, path, status, code] of [
      ["GET", "/dashboard/nope.js", 404, "route_not_found"],
      ["GET", "/dashboard/..%2f..%2fpackage.json", 404, "route_not_found"],
      ["GET", "/dashboard/../package.json", 404, "route_not_found"],
      ["POST", "/dashboard/", 405, "method_not_allowed"],
    ] as const) {
      const res = await request(`${origin()}${path}`, { method });
      const body = (await res.body.json()) as { error: { code: string; request_id: string } };
      expect({ path, status: res.statusCode, code: body.error.code }).toEqual({ path, status, code });
      expect(body.error.request_id).toMatch(/^req_/);
    }
  });
});

describe("in the browser", () => {
  it("refuses a wrong key with a clear message and signs in with a live and a test key", async () => {
    await page.goto(`${origin()}/dashboard/`);
    await page.getByLabel("Live key").fill("svc_live_not_a_real_key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "Live key:" }).waitFor();
    await shot("01-sign-in-error");

    await page.getByLabel("Live key").fill(suite.acme.live);
    await page.getByLabel("Test key").fill(suite.acme.test);
    await page.getByLabel("Test key").press("Enter");
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await expect(page.getByText("Acme", { exact: true }).isVisible()).resolves.toBe(true);
    await expect(page.getByRole("button", { name: "live", exact: true }).getAttribute("aria-pressed")).resolves.toBe("true");
    // The keys live in this tab's session storage only.
    const stored = await page.evaluate(() => [sessionStorage.length, localStorage.length, document.cookie]);
    expect(stored).toEqual([1, 0, ""]);
  });

  it("switches between live and test data", async () => {
    await page.getByRole("row", { name: /Default live key/ }).waitFor();
    await page.getByRole("button", { name: "test", exact: true }).click();
    await page.getByRole("row", { name: /Default test key/ }).waitFor();
    await expect(page.getByRole("row", { name: /Default live key/ }).count()).resolves.toBe(0);
    await page.getByText("Test data: nothing here touches live.").waitFor();
    await page.getByRole("button", { name: "live", exact: true }).click();
    await page.getByRole("row", { name: /Default live key/ }).waitFor();
  });

  it("creates a key, shows its secret once, and revokes it after a confirmation", async () => {
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByLabel("Name", { exact: true }).fill("Reporting");
    await page.getByRole("checkbox", { name: /events:read/ }).check();
    await page.getByRole("checkbox", { name: /analytics:read/ }).check();
    await page.getByRole("button", { name: "Create key" }).click();
    const secretBox = page.getByRole("textbox", { name: /Secret of “Reporting”/ });
    await secretBox.waitFor();
    await shot("02-key-created");
    const secret = await secretBox.inputValue();
    expect(secret).toMatch(/^svc_live_/);

    // The secret shown is the real one: it authenticates, with exactly the scopes chosen.
    const me = await call("GET", "/me", undefined, secret);
    expect(me.status).toBe(200);
    expect(me.body.data.api_key.scopes.sort()).toEqual(["analytics:read", "events:read"]);

    await page.getByRole("button", { name: "Copy" }).click();
    await page
      .getByRole("status")
      .filter({ hasText: /clipboard/ })
      .waitFor();
    await page.getByRole("button", { name: "I have saved it" }).click();
    await expect(secretBox.count()).resolves.toBe(0);
    // Gone from the page for good: nowhere in the DOM any more.
    await expect(page.content()).resolves.not.toContain(secret);

    await page.getByRole("button", { name: "Revoke Reporting" }).click();
    const dialog = page.getByRole("dialog", { name: /Revoke “Reporting”/ });
    await dialog.waitFor();
    // Escape cancels: nothing is revoked.
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    expect((await call("GET", "/me", undefined, secret)).status).toBe(200);

    await page.getByRole("button", { name: "Revoke Reporting" }).click();
    await shot("03-key-revoke-confirm");
    await dialog.getByRole("button", { name: "Revoke key" }).click();
    await page.getByRole("row", { name: /Reporting.*revoked/ }).waitFor();
    const refused = await call("GET", "/me", undefined, secret);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("api_key_revoked");
    await shot("04-keys");
  });

  let webhookId = "";
  let eventId = "";

  it("creates a webhook endpoint and shows its signing secret once", async () => {
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByText(/No webhook endpoints in live yet/).waitFor();
    await shot("05-webhooks-empty");
    await page.getByRole("button", { name: "Add endpoint" }).click();
    // A URL the platform refuses is explained next to the field.
    await page.getByLabel("Endpoint URL").fill("ftp://example.com/x");
    await page.getByLabel("Event types").fill("order.created");
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await page.locator("#url-error").waitFor();

    await page.getByLabel("Endpoint URL").fill(rx.url("/dash"));
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const secretBox = page.getByRole("textbox", { name: /Signing secret of/ });
    await secretBox.waitFor();
    const secret = await secretBox.inputValue();
    expect(secret).toMatch(/^whsec_/);
    rx.setSecret("/dash", secret);
    await page.getByRole("button", { name: "I have saved it" }).click();

    await page.getByRole("link", { name: rx.url("/dash") }).click();
    await page.getByText(/No deliveries yet/).waitFor();
    webhookId = decodeURIComponent(new URL(page.url()).hash.split("/")[2]);
    expect(webhookId).toMatch(/^wh_/);
    await shot("06-webhook");
  });

  it("sends an event from the events page and shows its JSON", async () => {
    await page.getByRole("link", { name: "Events" }).click();
    await page.getByRole("button", { name: "Send event" }).click();
    await page.getByLabel("Type").first().fill("order.created");
    await page.getByLabel("Data (JSON object)").fill('{"order_id": 42, "total": "19.90"}');
    await page.getByRole("button", { name: "Send event" }).click();
    const sent = page.getByRole("status").filter({ hasText: /^Sent evt_/ });
    await sent.waitFor();
    eventId = (await sent.getByRole("link").textContent()) ?? "";
    expect(eventId).toMatch(/^evt_/);
    await page.getByRole("row", { name: new RegExp(eventId) }).waitFor();
    await shot("07-events");

    await page.getByRole("table").getByRole("link", { name: eventId }).click();
    const json = page.getByLabel(`JSON of ${eventId}`);
    await json.waitFor();
    expect(JSON.parse((await json.textContent()) ?? "")).toMatchObject({
      id: eventId,
      type: "order.created",
      data: { order_id: 42, total: "19.90" },
      source: "api",
    });
    await shot("08-event");
  });

  it("shows the delivery arriving in the webhook's log, with its attempt, and redelivers it", async () => {
    await rx.waitFor(() => rx.byPath("/dash").length === 1);
    const got = rx.byPath("/dash")[0];
    expect(got.verified).toBe(true);
    expect(got.json).toMatchObject({ id: eventId, type: "order.created" });

    await page.goto(`${origin()}/dashboard/#/webhooks/${webhookId}`);
    const item = page.getByRole("listitem").filter({ hasText: eventId });
    await item.getByText("succeeded").waitFor();
    await item.locator("summary").click();
    const attempt = item.getByRole("row", { name: /^1 / });
    await attempt.waitFor();
    await expect(attempt.textContent()).resolves.toMatch(/200/);
    await shot("09-delivery-log");

    await page.getByLabel("Status").selectOption("failed");
    await page.getByText("No failed deliveries.").waitFor();
    await page.getByLabel("Status").selectOption("succeeded");
    await item.locator("summary").click();

    await item.getByRole("button", { name: "Redeliver" }).click();
    await rx.waitFor(() => rx.byPath("/dash").length === 2);
    expect(rx.byPath("/dash")[1].json.id).toBe(eventId);
    await item.getByText("2 attempts").waitFor();
  });

  it("disables, enables and rotates the secret of a webhook", async () => {
    await page.getByRole("button", { name: "Disable" }).click();
    await page.getByRole("button", { name: "Enable" }).waitFor();
    expect((await call("GET", `/webhooks/${webhookId}`)).body.data.status).toBe("disabled");
    await page.getByRole("button", { name: "Enable" }).click();
    await page.getByRole("button", { name: "Disable" }).waitFor();

    const fresh = await rotateSecret(page, "Rotate secret");
    expect(fresh).toMatch(/^whsec_/);
    // The next delivery verifies with the new secret alone.
    rx.setSecret("/dash", fresh);
    const third = (await call("POST", "/events", { type: "order.created", data: { order_id: 43 } })).body.data.id;
    await rx.waitFor(() => rx.byPath("/dash").length === 3);
    expect(rx.byPath("/dash")[2].verified).toBe(true);
    // The open log picks it up by itself (live updates), no reload.
    await page.getByRole("listitem").filter({ hasText: third }).getByText("succeeded").waitFor({ timeout: 10_000 });
  });

  it("shows every failed attempt of a delivery, with its status code, duration and error", async () => {
    const broken = (await call("POST", "/webhooks", { url: rx.url("/broken"), events: ["invoice.paid"] })).body.data;
    rx.setSecret("/broken", broken.secret);
    rx.behave("/broken", () => ({ status: 503 }));
    const evt = (await call("POST", "/events", { type: "invoice.paid", data: { invoice: "in_1" } })).body.data.id;
    await rx.waitFor(() => rx.byPath("/broken").length === 5, 15_000);

    await page.goto(`${origin()}/dashboard/#/webhooks/${broken.id}`);
    await page.getByRole("heading", { name: rx.url("/broken") }).waitFor();
    // The other endpoint's new secret, shown on its page, is not carried over to this one.
    await expect(page.getByRole("textbox", { name: "New signing secret" }).count()).resolves.toBe(0);
    await page.getByLabel("Status").selectOption("failed");
    const item = page.getByRole("listitem").filter({ hasText: evt });
    await item.getByText("5 attempts").waitFor({ timeout: 10_000 });
    await item.locator("summary").click();
    const rows = item.getByRole("row");
    await expect(rows.count()).resolves.toBe(6); // the header and five attempts
    for (const n of [1, 2, 3, 4, 5]) {
      await expect(item.getByRole("row", { name: new RegExp(`^${n} `) }).textContent()).resolves.toMatch(/503.*\d+ ms/);
    }
    await expect(item.getByRole("cell", { name: /503/ }).first().isVisible()).resolves.toBe(true);
    await shot("10-delivery-failed");
  });

  it("creates a workflow, starts a run, and approves it while it waits", async () => {
    await page.getByRole("link", { name: "Workflows" }).click();
    await page.getByText("No workflows in live yet.").waitFor();
    await page.getByRole("button", { name: "New workflow" }).click();
    const definition = {
      name: "Refund approval",
      trigger: { type: "manual" },
      steps: [
        { id: "ask", type: "approval", message: "Refund {{input.amount}}?" },
        {
          id: "notify",
          type: "http",
          method: "POST",
          url: `http://127.0.0.1:${(target.address() as { port: number }).port}/refunds`,
          body: { amount: "{{input.amount}}" },
        },
      ],
    };
    await page.getByLabel(/Definition/).fill(JSON.stringify(definition));
    await page.getByRole("button", { name: "Create workflow" }).click();
    // Its signing secret first, shown once; then the workflow's page.
    await expect(page.getByRole("textbox", { name: "Signing secret of “Refund approval”" }).inputValue()).resolves.toMatch(/^whsec_/);
    await page.getByRole("button", { name: "I have saved it" }).click();
    await page.getByRole("heading", { name: "Refund approval" }).waitFor();

    await page.getByLabel("Input (JSON object)").fill('{"amount": 25}');
    await page.getByRole("button", { name: "Start run" }).click();
    await page.getByText(/This run waits for approval at step/).waitFor();
    await shot("11-run-waiting");

    await page.getByRole("button", { name: "Approve" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Approve" }).click();
    await page.getByRole("listitem", { name: "Step notify: succeeded" }).waitFor({ timeout: 15_000 });
    await page.getByRole("listitem", { name: "Step ask: succeeded" }).waitFor();
    await page.locator(".page-head .status", { hasText: "succeeded" }).waitFor();
    await shot("12-run-succeeded");
    expect(posted).toEqual([{ amount: 25 }]);

    // A second run, rejected: it ends failed and its http step never runs.
    await page.getByRole("link", { name: /^wf_/ }).click();
    await page.getByLabel("Input (JSON object)").fill('{"amount": 99}');
    await page.getByRole("button", { name: "Start run" }).click();
    await page.getByText(/This run waits for approval at step/).waitFor();
    await page.getByRole("button", { name: "Reject" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Reject" }).click();
    await page.locator(".page-head .status", { hasText: "failed" }).waitFor();
    await page
      .getByRole("listitem", { name: "Step notify: skipped" })
      .or(page.getByRole("listitem", { name: "Step notify: pending" }))
      .waitFor();
    await expect(page.getByRole("button", { name: "Approve" }).count()).resolves.toBe(0);
    expect(posted).toEqual([{ amount: 25 }]);
  });

  it("charts the organization's requests, errors, routes and success rates", async () => {
    // The gateway sends its meter every second: wait until the routes the page shows are counted.
    await waitFor("the dashboard's requests counted in usage", async () => {
      const routes = new Set((await call("GET", "/analytics/usage?group_by=route")).body.data.buckets.map((b: any) => b.route));
      return routes.has("POST /events") && routes.has("GET /webhooks/{id}/deliveries");
    });
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByRole("img", { name: /Requests per hour: \d+ requests/ }).waitFor();
    await page.locator(".chart canvas").waitFor();
    await page.getByRole("row", { name: /POST \/events/ }).waitFor();
    await page.getByRole("row", { name: /GET \/webhooks\/\{id\}\/deliveries / }).waitFor();
    const runRate = page.getByRole("article", { name: "Run success rate" });
    // One run approved and succeeded, one rejected (failed).
    await expect(runRate.locator("[data-rate]").textContent()).resolves.toBe("50.0 %");
    const deliveryRate = page.getByRole("article", { name: "Delivery attempt success rate" });
    // Every attempt the receiver saw on /dash was answered 2xx, every one on /broken 503 (five, and
    // its delivery failed); the two deliveries to /dash succeeded.
    const ok = rx.byPath("/dash").length;
    const failed = rx.byPath("/broken").length;
    expect(failed).toBe(5);
    await expect(deliveryRate.locator("[data-rate]").textContent()).resolves.toBe(`${((100 * ok) / (ok + failed)).toFixed(1)} %`);
    await expect(deliveryRate.locator("[data-settled-rate]").textContent()).resolves.toBe("66.7 % of settled deliveries succeeded");
    await shot("13-usage");
  });

  it("fits a narrow phone screen without sideways scrolling", async () => {
    await page.setViewportSize({ width: 375, height: 812 });
    for (const [route, heading] of [
      ["keys", "API keys"],
      [`webhooks/${webhookId}`, "Delivery log"],
      ["events", "Events"],
      ["workflows", "Workflows"],
      ["usage", "Requests and errors"],
    ]) {
      await page.goto(`${origin()}/dashboard/#/${route}`);
      await page.getByRole("heading", { name: heading, exact: true }).waitFor();
      await page
        .getByText(/^Loading/)
        .first()
        .waitFor({ state: "detached" });
      // Charts follow their box's width on the next frame.
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      // Wide tables scroll inside their own box; the page itself never does.
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect({ route, overflow }).toEqual({ route, overflow: 0 });
      await shot(`14-narrow-${route.split("/")[0]}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("signs out with the reason when the signed-in key is revoked elsewhere", async () => {
    const issued = await call("POST", "/api-keys", { name: "Short-lived", scopes: ["org:admin"] });
    const other = await context.newPage();
    await other.goto(`${origin()}/dashboard/`);
    await other.getByLabel("Live key").fill(issued.body.data.key);
    await other.getByRole("button", { name: "Sign in" }).click();
    await other.getByRole("heading", { name: "API keys" }).waitFor();
    await other.waitForURL(/#\/keys$/);
    await other.getByRole("row", { name: /Short-lived/ }).waitFor();
    expect((await call("DELETE", `/api-keys/${issued.body.data.id}`)).status).toBe(200);
    await other.getByRole("link", { name: "Events" }).click();
    await other
      .getByRole("status")
      .filter({ hasText: /Signed out: .*revoked/ })
      .waitFor();
    await other.getByRole("heading", { name: "Sign in" }).waitFor();
    await screenshot(other, "15-signed-out");
    await other.close();
  });

  it("ran without a console error, a script the policy blocked, or a refusal it did not ask for", () => {
    expect(problems).toEqual([]);
    // The wrong key at sign-in and the ftp:// endpoint, both on purpose; nothing else failed.
    expect(refusals).toEqual(["401 GET /v1/me", "400 POST /v1/webhooks"]);
  });
});
