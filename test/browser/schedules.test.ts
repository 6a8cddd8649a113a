/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { launchChromium, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * A scheduled workflow in the dashboard, in a real headless Chromium: the list and the workflow's
 * page say what its schedule is, and a run a schedule started says so, and which tick it was.
 */
const suite = usePlatform();
let browser: Browser;
let page: Page;
const problems: string[] = [];

const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  await signIn(page, dashboard(""), { live: suite.acme.live, test: suite.acme.test });
});

afterAll(() => browser?.close());
afterEach(() => expect(problems).toEqual([]));

describe("scheduled workflows in the dashboard", () => {
  it("shows the cron and its zone, and a run started by the schedule with its tick", async () => {
    const trigger = { type: "schedule", cron: "0 8 * * 1-5", timezone: "Europe/Berlin" };
    const wf = await call("POST", "/workflows", { name: "Weekday report", trigger, steps: [{ id: "a", type: "set", output: 1 }] });
    const every = await call("POST", "/workflows", {
      name: "Every minute",
      trigger: { type: "schedule", every_ms: 60_000 },
      steps: [{ id: "a", type: "set", output: 1 }],
    });
    expect(every.status).toBe(201);
    const run = await call("POST", `/workflows/${wf.body.data.id}/schedule/trigger`);
    expect(run.status).toBe(201);

    await page.goto(dashboard("#/workflows"));
    await page
      .getByRole("row", { name: /Weekday report/ })
      .getByText("cron 0 8 * * 1-5 (Europe/Berlin)")
      .waitFor();
    await page
      .getByRole("row", { name: /Every minute/ })
      .getByText("every 60000 ms")
      .waitFor();
    await page.goto(dashboard(`#/workflows/${wf.body.data.id}/runs/${run.body.data.id}`));
    await page.getByText(`schedule (trigger, ${run.body.data.trigger.scheduled_at})`).waitFor();
    await screenshot(page, "scheduled-run");
  });
});
