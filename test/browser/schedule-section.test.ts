/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { manualClock } from "../helpers/clock";
import { launchChromium, newPage, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * A scheduled workflow's page, in a real headless Chromium: its next ticks, its counts, and its
 * recent ticks, the ones that started a run (linked) beside those it recorded as missed. The
 * schedule reads the suite's clock, which only the test moves.
 */
const MINUTE = 60_000;
const clock = manualClock(Date.UTC(2026, 10, 26, 12, 0, 10));
const suite = usePlatform({}, { clock });
const iso = (ms: number) => new Date(ms).toISOString();
let browser: Browser;
let page: Page;
const problems: string[] = [];

const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
  page = await newPage(browser, problems);
  await signIn(page, dashboard(""), { live: suite.acme.live });
});

afterAll(() => browser?.close());
afterEach(() => expect(problems).toEqual([]));

describe("the schedule section of a workflow's page", () => {
  it("shows the next ticks, the missed ones and the runs the late ones started", async () => {
    const created = await call("POST", "/workflows", {
      name: "Every minute",
      trigger: { type: "schedule", every_ms: MINUTE, overlap: "allow", catchup_window_ms: 3 * MINUTE + 30_000 },
      steps: [{ id: "a", type: "set", output: 1 }],
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const first = Math.floor(clock.now() / MINUTE) * MINUTE + MINUTE;
    // Nothing ticked for ten minutes: the last four ticks are within the window and start late, six are missed.
    clock.set(first + 9 * MINUTE);
    await waitFor("four runs", async () => (await call("GET", `/workflows/${id}/runs`)).body.data.length === 4);
    const runs = (await call("GET", `/workflows/${id}/runs`)).body.data as { id: string; trigger: { scheduled_at: string } }[];

    await page.goto(dashboard(`#/workflows/${id}`));
    const section = page.getByRole("region", { name: "Schedule" });
    await section.getByText("Missed ticks").waitFor();
    const fact = (name: string) => section.locator("dt", { hasText: name }).locator("xpath=following-sibling::dd[1]");
    await expect(fact("Missed ticks").textContent()).resolves.toBe("6");
    await expect(fact("Skipped ticks").textContent()).resolves.toBe("0");
    await expect(fact("Next run").locator("time").getAttribute("datetime")).resolves.toBe(iso(first + 10 * MINUTE));
    const upcoming = section.getByRole("list", { name: "Next ticks" }).locator("time");
    await expect(upcoming.evaluateAll((times) => times.map((t) => t.getAttribute("datetime")))).resolves.toEqual(
      [10, 11, 12, 13, 14].map((m) => iso(first + m * MINUTE)),
    );

    const rows = section.getByRole("table", { name: "Recent ticks" }).locator("tbody tr");
    await expect(rows.count()).resolves.toBe(5);
    for (const [i, minute] of [9, 8, 7, 6].entries()) {
      const run = runs.find((r) => r.trigger.scheduled_at === iso(first + minute * MINUTE))!;
      await expect(rows.nth(i).locator("time").first().getAttribute("datetime")).resolves.toBe(iso(first + minute * MINUTE));
      await expect(rows.nth(i).getByRole("link", { name: run.id }).count()).resolves.toBe(1);
    }
    const missed = rows.nth(4);
    await expect(missed.textContent()).resolves.toContain("missed: 6 ticks, older than the catch-up window");
    await expect(missed.locator("time").evaluateAll((times) => times.map((t) => t.getAttribute("datetime")))).resolves.toEqual([
      iso(first),
      iso(first + 5 * MINUTE),
      iso(first + 9 * MINUTE),
    ]);
    await screenshot(page, "70-schedule-section");

    // A started tick opens its run.
    const latest = runs.find((r) => r.trigger.scheduled_at === iso(first + 9 * MINUTE))!;
    await rows.nth(0).getByRole("link", { name: latest.id }).click();
    await page.waitForURL(`**/#/workflows/${id}/runs/${latest.id}`);
  });
});
