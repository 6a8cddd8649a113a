/// <reference lib="dom" />
import type { Browser, Locator, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, newPage, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * The run page shows a wait_for_event step: what it waits for (the event type and its match, the
 * templates filled) and until when, then, once its event came, what it waited for and the event as
 * its output. In a real headless Chromium against the whole platform; screenshots land in
 * test-artifacts/dashboard/.
 */
const suite = usePlatform();
let browser: Browser;
let page: Page;
const problems: string[] = [];

const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });
const text = async (l: Locator) => ((await l.textContent()) ?? "").replace(/\s+/g, " ").trim();

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
  page = await newPage(browser, problems);
  await signIn(page, dashboard(""), { live: suite.acme.live, test: suite.acme.test });
});

afterAll(async () => {
  await browser?.close();
});

afterEach(() => expect(problems).toEqual([]));

it("shows what a waiting step waits for and until when, then what it waited for", async () => {
  const wf = await call("POST", "/workflows", {
    name: "Ship once paid",
    trigger: { type: "manual" },
    steps: [
      {
        id: "pay",
        type: "wait_for_event",
        event_type: "payment.succeeded",
        match: { "data.order_id": "{{ input.order_id }}" },
        timeout_ms: 3_600_000,
      },
    ],
  });
  expect(wf.status).toBe(201);
  const started = await call("POST", `/workflows/${wf.body.data.id}/runs`, { input: { order_id: "o_7" } });
  const path = `/workflows/${wf.body.data.id}/runs/${started.body.data.id}`;
  let run: any;
  await waitFor("the run to wait", async () => (run = (await call("GET", path)).body.data).status === "waiting");

  await page.goto(dashboard(`#${path}`));
  const waiting = page.getByRole("listitem", { name: "Step pay: waiting" });
  await waiting.waitFor();
  expect(await text(waiting)).toContain('Waits for payment.succeeded with {"data.order_id":"o_7"}, until');
  expect(await waiting.locator(`time[datetime="${run.steps[0].timeout_at}"]`).count()).toBeGreaterThan(0);
  await screenshot(page, "run-waiting-for-event");

  const event = await call("POST", "/events", { type: "payment.succeeded", data: { order_id: "o_7" } });
  await waitFor("the run to succeed", async () => (await call("GET", path)).body.data.status === "succeeded");
  await page.reload();
  const done = page.getByRole("listitem", { name: "Step pay: succeeded" });
  await done.waitFor();
  expect(await text(done)).toContain('Waited for payment.succeeded with {"data.order_id":"o_7"}.');
  await done.getByText("Output").click();
  expect(await text(done)).toContain(event.body.data.id);
});
