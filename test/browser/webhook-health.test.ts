import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, newPage, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";
import { startReceiver, type Receiver } from "../helpers/receiver";

/**
 * Endpoint health on the dashboard's webhooks list, in a real headless Chromium against the whole
 * platform: a receiver answering 500 shows as failing, one failing most of its attempts as degraded
 * (neither ever as a green "enabled"), a healthy one as enabled. The failed deliveries stay pending
 * (their retry is a minute away): their attempts count all the same. The screenshot lands in
 * test-artifacts/dashboard/.
 */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WEBHOOK_RETRY_DELAYS_MS: "60000,60000,60000,60000" });
let rx: Receiver;
let browser: Browser;
let page: Page;
const problems: string[] = [];
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  [rx, browser] = await Promise.all([startReceiver(), launchChromium()]);
  page = await newPage(browser, problems);
});
afterAll(() => Promise.all([browser?.close(), rx?.close()]));

it("shows a failing endpoint as failing, a mostly failing one as degraded, never as enabled; a healthy one as enabled", async () => {
  const hooks: Record<string, { id: string; url: string }> = {};
  for (const name of ["up", "down", "flaky"]) {
    const wh = (await call("POST", "/webhooks", { url: rx.url(`/${name}`), events: ["order.created"] })).body.data;
    rx.setSecret(`/${name}`, wh.secret);
    hooks[name] = wh;
  }
  rx.behave("/down", () => ({ status: 500, body: "db down" }));
  // Two failures, then a success: no failure in a row, one attempt in three succeeded.
  rx.behave("/flaky", (n) => ({ status: n <= 2 ? 500 : 200 }));
  for (let i = 1; i <= 3; i++) {
    expect((await call("POST", "/events", { type: "order.created", data: { i } })).status).toBe(201);
    await rx.waitFor(() => ["/up", "/down", "/flaky"].every((p) => rx.byPath(p).length === i));
  }
  // The figures as the API answers them, once every attempt is counted.
  const health = async () => {
    const list: any[] = (await call("GET", "/webhooks?per_page=100")).body.data;
    return Object.fromEntries(list.map((wh) => [wh.id, wh.health]));
  };
  await waitFor("every attempt counted in the health figures", async () =>
    Object.values(await health()).every((h: any) => h.attempts_24h.total === 3),
  );
  const figures = await health();
  expect(figures[hooks.down.id]).toMatchObject({
    consecutive_failed_attempts: 3,
    success_rate_24h: 0,
    last_attempt: { status_code: 500, ok: false },
  });
  expect(figures[hooks.flaky.id]).toMatchObject({ consecutive_failed_attempts: 0, attempts_24h: { total: 3, succeeded: 1, failed: 2 } });
  expect(figures[hooks.up.id]).toMatchObject({ consecutive_failed_attempts: 0, success_rate_24h: 1 });
  // The failing deliveries are still pending: counted anyway.
  const pending = (await call("GET", `/webhooks/${hooks.down.id}/deliveries`)).body.data;
  expect(pending.map((d: any) => d.status)).toEqual(["pending", "pending", "pending"]);

  const origin = suite.p.baseUrl.replace(/\/v1$/, "");
  await page.goto(`${origin}/dashboard/`);
  await page.getByLabel("Live key").fill(suite.acme.live);
  await page.getByLabel("Live key").press("Enter");
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  await page.goto(`${origin}/dashboard/#/webhooks`);
  const row = (name: string) => page.getByRole("row").filter({ hasText: rx.url(`/${name}`) });
  await row("down").locator("[data-health]").waitFor();

  const down = row("down").locator("[data-health]");
  await expect(down.getAttribute("data-health")).resolves.toBe("failing");
  await expect(down.textContent()).resolves.toBe("failing: 3 in a row, 0 % 24 h");
  const flaky = row("flaky").locator("[data-health]");
  await expect(flaky.getAttribute("data-health")).resolves.toBe("degraded");
  await expect(flaky.textContent()).resolves.toBe("degraded: 33.3 % 24 h");
  for (const bad of [down, flaky]) {
    await expect(bad.locator(".status.bad").count()).resolves.toBe(1);
    await expect(bad.textContent()).resolves.not.toMatch(/enabled/i);
  }
  const up = row("up").locator("[data-health]");
  await expect(up.getAttribute("data-health")).resolves.toBe("enabled");
  await expect(up.textContent()).resolves.toMatch(/^enabled\s*100 % 24 h$/i);
  await screenshot(page, "webhooks-health");
  expect(problems).toEqual([]);
});
