/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { manualClock } from "../helpers/clock";
import { launchChromium, newPage, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * The runs that wait and the bulk jobs, in a real headless Chromium: `#/runs/queued` says why each
 * queued run waits and under which key; a bulk job started from the dashboard shows its progress,
 * and is cancelled there. The per-minute start budget reads the suite's clock, which stays in one
 * minute: a bulk rerun past the budget waits, running, until the test cancels it.
 */
const clock = manualClock(Date.UTC(2026, 10, 27, 12, 0, 10));
const START_BUDGET = 5;
const suite = usePlatform({ RUN_STARTS_PER_MINUTE: String(START_BUDGET) }, { clock });
let browser: Browser;
const problems: string[] = [];

const origin = () => suite.p.baseUrl.replace(/\/v1$/, "");

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(() => browser?.close());
afterEach(() => expect(problems).toEqual([]));

async function signedIn(key: string): Promise<Page> {
  const page = await newPage(browser, problems);
  await page.goto(`${origin()}/dashboard/`);
  await page.getByLabel("Live key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Workflows" }).waitFor();
  return page;
}

describe("queued runs", () => {
  it("lists the runs held by a concurrency limit, with the reason and the key", async () => {
    const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });
    const created = await call("POST", "/workflows", {
      name: "One at a time per customer",
      trigger: { type: "manual" },
      concurrency: { limit: 1, key: "{{ input.customer }}" },
      steps: [{ id: "hold", type: "approval", message: "hold the key" }],
    });
    expect(created.status).toBe(201);
    const wf = created.body.data.id as string;
    const start = async (customer: string) => (await call("POST", `/workflows/${wf}/runs`, { input: { customer } })).body.data.id as string;
    const first = await start("cus_42");
    const held = await start("cus_42");
    const other = await start("cus_7");
    await waitFor("the first of each key waiting", async () => {
      const runs = await Promise.all([first, other].map(async (id) => (await call("GET", `/workflows/${wf}/runs/${id}`)).body.data));
      return runs.every((r) => r.status === "waiting");
    });

    const page = await signedIn(suite.acme.live);
    await page.getByRole("link", { name: "Runs", exact: true }).click();
    await page.getByRole("heading", { name: "Runs" }).waitFor();
    await page.getByLabel("Status").selectOption("queued");
    await page.waitForURL("**/#/runs/queued");
    await page.getByRole("heading", { name: "Queued runs" }).waitFor();
    const rows = page.locator("tbody tr");
    await rows.first().waitFor();
    await expect(rows.count()).resolves.toBe(1);
    const row = rows.first();
    await expect(row.getByRole("link", { name: held }).getAttribute("href")).resolves.toBe(`#/workflows/${wf}/runs/${held}`);
    await expect(row.textContent()).resolves.toContain("concurrency its key's concurrency limit is reached");
    await expect(row.locator("code").textContent()).resolves.toBe('"cus_42"');
    await screenshot(page, "72-queued-runs");

    // The same list for one workflow.
    await page.getByRole("textbox", { name: "Workflow" }).fill(wf);
    // The page starts afresh on the new route; its rows are the ones its own request answered.
    const answered = page.waitForResponse((res) => res.url().includes(`workflow_id=${wf}`));
    await page.getByRole("textbox", { name: "Workflow" }).press("Enter");
    await answered;
    await page.waitForURL(`**/#/runs/queued/${wf}`);
    await page.locator("tbody tr").first().getByRole("link", { name: held }).waitFor();
    await expect(page.locator("tbody tr").count()).resolves.toBe(1);

    // Its key gets room once the run before it ends: the list says so on its own.
    await call("POST", `/workflows/${wf}/runs/${first}/approve`);
    await page.getByText(`No queued runs of ${wf}.`).waitFor();
    await page.close();
  });
});

describe("bulk jobs", () => {
  it("starts one from a filter, shows its progress, and cancels it", async () => {
    const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.globex.live, body });
    const created = await call("POST", "/workflows", {
      name: "Quick",
      trigger: { type: "manual" },
      steps: [{ id: "a", type: "set", output: 1 }],
    });
    const wf = created.body.data.id as string;
    const ids: string[] = [];
    for (let i = 0; i < START_BUDGET - 1; i++) ids.push((await call("POST", `/workflows/${wf}/runs`, { input: { i } })).body.data.id);
    await waitFor("every run to succeed", async () => {
      const runs = (await call("GET", `/workflows/${wf}/runs`)).body.data as { status: string }[];
      return runs.length === ids.length && runs.every((r) => r.status === "succeeded");
    });

    const page = await signedIn(suite.globex.live);
    await page.getByRole("link", { name: "Bulk jobs" }).click();
    await page.getByText("No bulk jobs in this environment yet.").waitFor();
    await page.getByRole("button", { name: "New bulk job" }).click();
    await page.getByLabel("Action").selectOption("rerun");
    await page.getByLabel("Workflow id").fill(wf);
    await page.getByRole("button", { name: "Start bulk job" }).click();
    await page.waitForURL(/#\/bulk\/blk_/);
    const jobId = page.url().split("/").pop()!;
    // One rerun takes the budget's last start; the next waits for a minute with room, the job running.
    await page.getByText(`1 matched of ${ids.length} in range · 1 done · 0 failed`).waitFor();
    const fact = (name: string) => page.locator("dt", { hasText: name }).locator("xpath=following-sibling::dd[1]");
    await expect(fact("Runs").textContent()).resolves.toBe(`workflow ${wf}`);
    await expect(page.locator("header .status").textContent()).resolves.toBe("running");
    await expect(page.getByRole("progressbar").getAttribute("value")).resolves.toBe("1");
    await screenshot(page, "73-bulk-job-running");

    await page.getByRole("button", { name: "Cancel job" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Cancel job" }).click();
    await page.locator("header .status", { hasText: "cancelled" }).waitFor();
    await expect(page.getByRole("button", { name: "Cancel job" }).count()).resolves.toBe(0);
    expect((await call("GET", `/runs/bulk/${jobId}`)).body.data).toMatchObject({ status: "cancelled", matched: 1, done: 1 });

    await page.getByRole("navigation", { name: "Breadcrumb" }).getByRole("link", { name: "Bulk jobs" }).click();
    const row = page.getByRole("row", { name: new RegExp(jobId) });
    await expect(row.locator(".status").textContent()).resolves.toBe("cancelled");
    await expect(row.textContent()).resolves.toContain(`rerun`);
    await screenshot(page, "74-bulk-jobs");
    await page.close();
  });
});
