/// <reference lib="dom" />
import type { Browser, Locator, Page } from "playwright-core";
import { durationText } from "../../dashboard/src/pages/workflows/run-facts.logic";
import { waitFor } from "../../tools/procs";
import { launchChromium, newPage, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";
import { startStepTarget, type StepTarget } from "../helpers/steps";

/**
 * The run page shows what the workflow language did, in a real headless Chromium against the
 * whole platform: skipped steps and the condition that skipped them, the stop step and its
 * message, a failed run's failed step, every attempt of a retried http step (with the wait before
 * each retry), the run's and an approval's time-outs with their deadlines, and until when a
 * waiting run waits. Runs are made through the HTTP API, http steps call a real server on
 * 127.0.0.1 (test/helpers/steps.ts); screenshots land in test-artifacts/dashboard/.
 */

const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" });
let browser: Browser;
let page: Page;
/** The http steps' target on 127.0.0.1, answering each path as a test says. */
let target: StepTarget;
const problems: string[] = [];

const dashboard = (hash: string) => `${suite.p.baseUrl.replace(/\/v1$/, "")}/dashboard/${hash}`;
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  target = await startStepTarget();
  browser = await launchChromium();
  page = await newPage(browser, problems);
  await signIn(page, dashboard(""), { live: suite.acme.live, test: suite.acme.test });
});

afterAll(async () => {
  await browser?.close();
  await target?.close();
});

afterEach(() => expect(problems).toEqual([]));

/** A workflow made of `definition` (name and manual trigger added), and a run of it started with `input`. */
async function startedRun(definition: Record<string, unknown>, input: Record<string, unknown> = {}) {
  const wf = await call("POST", "/workflows", { name: "Run page", trigger: { type: "manual" }, ...definition });
  expect(wf.status).toBe(201);
  const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, { input });
  expect(run.status).toBe(201);
  return { wfId: wf.body.data.id as string, runId: run.body.data.id as string };
}

/** The run as the API shows it once `done` holds of it. */
async function runWhen(wfId: string, runId: string, what: string, done: (run: any) => boolean): Promise<any> {
  let run: any;
  await waitFor(what, async () => done((run = (await call("GET", `/workflows/${wfId}/runs/${runId}`)).body.data)), 15_000);
  return run;
}

/** Every run page the tests above opened, seen again at a phone's width by the last one. */
const opened: string[] = [];
/** Opens a run's page and waits until it has read its steps' definitions (conditions, time limits). */
const open = async (wfId: string, runId: string) => {
  opened.push(`#/workflows/${wfId}/runs/${runId}`);
  await page.goto(dashboard(`#/workflows/${wfId}/runs/${runId}`));
  await page.locator('section[data-definition="read"]').waitFor();
};
const step = (id: string, status: string) => page.getByRole("listitem", { name: `Step ${id}: ${status}` });
const text = async (l: Locator) => ((await l.textContent()) ?? "").replace(/\s+/g, " ").trim();
/** The time element showing `iso` inside `within` (the page shows times in the reader's locale, `iso` in its datetime). */
const timeAt = (within: Locator, iso: string) => within.locator(`time[datetime="${iso}"]`);

describe("the run page", () => {
  it("shows a skipped step with its condition, the stop step's message, and the steps the stop left unrun", async () => {
    const { wfId, runId } = await startedRun(
      {
        steps: [
          { id: "total", type: "set", output: { amount: "{{ input.amount }}" } },
          { id: "review", type: "approval", message: "Refund {{ input.amount }}?", if: "input.amount >= 500" },
          {
            id: "too_small",
            type: "stop",
            if: "input.amount < 200",
            status: "failed",
            message: "refund of {{ input.amount }} is under the minimum",
          },
          { id: "pay", type: "emit", event_type: "refund.paid", data: { amount: "{{ input.amount }}" } },
        ],
      },
      { amount: 120 },
    );
    const run = await runWhen(wfId, runId, "the run stopped", (r) => r.status === "failed");
    expect(run).toMatchObject({ stop_message: "refund of 120 is under the minimum", timeout_ms: null, deadline_at: null });
    await open(wfId, runId);

    const ended = page.getByRole("status", { name: "How the run ended" });
    await ended.waitFor();
    expect(await text(ended)).toBe("Stopped by step too_small as failed: refund of 120 is under the minimum");
    const review = step("review", "skipped");
    expect(await text(review.locator(".skip-reason"))).toBe("Skipped: its condition was false (if: input.amount >= 500).");
    expect(await text(step("too_small", "failed").getByRole("note"))).toBe("refund of 120 is under the minimum (stopped)");
    expect(await text(step("too_small", "failed"))).toContain("Its condition held: input.amount < 200");
    expect(await text(step("pay", "skipped").locator(".skip-reason"))).toBe("Not run: the run ended at step too_small before it.");
    await step("total", "succeeded").getByText("Output").click();
    await expect(page.getByLabel("Output of step total").textContent()).resolves.toContain('"amount": 120');
    // A stop is the workflow's own decision: a retry would stop again, so only a rerun is offered.
    await expect(page.getByRole("button", { name: "Retry from the failed step" }).count()).resolves.toBe(0);
    await expect(page.getByRole("button", { name: "Rerun with the same input" }).count()).resolves.toBe(1);
    await screenshot(page, "50-run-stopped-skipped");
  });

  it("lists every attempt of a retried http step with its status, error and the wait before it; a failure let through says so", async () => {
    let flaky = 0;
    target.answer = (_n, req) => (req.path === "/flaky" ? { status: ++flaky === 1 ? 503 : 200, json: { ok: flaky > 1 } } : { status: 400 });
    const retry = { max_attempts: 3, initial_interval_ms: 300, backoff_rate: 2, max_interval_ms: 1000, jitter: "none", on: ["5xx"] };
    const { wfId, runId } = await startedRun({
      steps: [
        { id: "reserve", type: "http", method: "POST", url: `${target.url}/flaky`, retry },
        { id: "notify", type: "http", method: "POST", url: `${target.url}/refuses`, on_error: "continue" },
      ],
    });
    const run = await runWhen(wfId, runId, "the run ended", (r) => r.finished_at !== null);
    expect(run.status).toBe("succeeded");
    const [first, second] = run.steps[0].attempts;
    expect(run.steps[0].attempts).toHaveLength(2);
    expect(first).toMatchObject({ attempt: 1, status_code: 503 });
    expect(second).toMatchObject({ attempt: 2, status_code: 200, error: null });
    const waited = Date.parse(second.started_at) - Date.parse(first.finished_at);
    expect(waited).toBeGreaterThanOrEqual(300);
    expect(target.got.map((r) => r.path)).toEqual(["/flaky", "/flaky", "/refuses"]);
    await open(wfId, runId);

    const table = step("reserve", "succeeded").getByRole("table", { name: "Attempts of step reserve" });
    await table.waitFor();
    const rows = table.locator("tbody tr");
    await expect(rows.count()).resolves.toBe(2);
    const cells = async (row: Locator) => Promise.all((await row.locator("td").all()).map(text));
    const [one, two] = [await cells(rows.nth(0)), await cells(rows.nth(1))];
    expect([one[0], one[1], one[4], one[5]]).toEqual(["1", "—", "HTTP 503", first.error]);
    expect(first.error).toMatch(/503/);
    expect([two[0], two[1], two[4], two[5]]).toEqual(["2", durationText(waited), "HTTP 200", "—"]);
    await expect(timeAt(rows.nth(1), second.started_at).count()).resolves.toBe(1);
    expect(await text(step("reserve", "succeeded").locator(".step-attempts summary"))).toBe("Attempts (2)");
    expect(await text(step("reserve", "succeeded"))).toContain("Retry policy: up to 3 attempts on 5xx; first wait 300 ms, ×2, at most 1 s");

    const notify = step("notify", "failed");
    expect(await text(notify)).toContain("The run went on past this failure (on_error: continue).");
    expect(await text(notify.getByRole("table").locator("tbody tr td").nth(4))).toBe("HTTP 400");
    await expect(page.getByRole("status", { name: "How the run ended" }).count()).resolves.toBe(0);
    await screenshot(page, "51-run-attempts");
  });

  it("says a run timed out at its deadline, with its workflow's timeout_ms (the smallest, 1 ms)", async () => {
    const { wfId, runId } = await startedRun({ timeout_ms: 1, steps: [{ id: "nap", type: "delay", duration_ms: 3_600_000 }] });
    const run = await runWhen(wfId, runId, "the run timed out", (r) => r.status === "failed");
    expect(run.steps[0]).toMatchObject({ status: "failed", error_code: "run_timed_out" });
    expect(Date.parse(run.deadline_at)).toBe(Date.parse(run.created_at) + 1);
    await open(wfId, runId);

    const ended = page.getByRole("status", { name: "How the run ended" });
    await ended.waitFor();
    expect(await text(ended)).toMatch(
      /^Timed out: the run had not ended by its deadline .+ \(its workflow's timeout_ms, 1 ms\); it failed at step nap\.$/,
    );
    await expect(timeAt(ended, run.deadline_at).count()).resolves.toBe(1);
    const limit = page.locator("dt", { hasText: "Time limit" }).locator("xpath=following-sibling::dd[1]");
    expect(await text(limit)).toMatch(/^1 ms, until /);
    await expect(timeAt(limit, run.deadline_at).count()).resolves.toBe(1);
    expect(await text(step("nap", "failed").getByRole("note"))).toContain("(run_timed_out)");
    await screenshot(page, "52-run-timed-out");
  });

  it("says an approval timed out, with when it did", async () => {
    const { wfId, runId } = await startedRun({ steps: [{ id: "gate", type: "approval", message: "Ship?", timeout_ms: 1 }] });
    const run = await runWhen(wfId, runId, "the approval timed out", (r) => r.status === "failed");
    const gate = run.steps[0];
    expect(gate).toMatchObject({ status: "failed", error_code: "timed_out", timeout_at: expect.any(String) });
    await open(wfId, runId);

    const ended = page.getByRole("status", { name: "How the run ended" });
    await ended.waitFor();
    expect(await text(ended)).toMatch(/^Timed out: no decision on approval step gate by .+\.$/);
    await expect(timeAt(ended, gate.timeout_at).count()).resolves.toBe(1);
    const note = step("gate", "failed").locator(".timed-out");
    expect(await text(note)).toMatch(/^Timed out: no decision by .+\.$/);
    await expect(timeAt(note, gate.timeout_at).count()).resolves.toBe(1);
    await screenshot(page, "53-approval-timed-out");
  });

  it("shows until when a waiting run waits: an approval until it times out, before the run's deadline; a delay until its end", async () => {
    const asked = await startedRun({
      timeout_ms: 600_000,
      steps: [{ id: "gate", type: "approval", message: "Ship order 7?", timeout_ms: 3_600_000 }],
    });
    const waiting = await runWhen(asked.wfId, asked.runId, "the run waits", (r) => r.status === "waiting");
    await open(asked.wfId, asked.runId);
    const notice = page.getByRole("status", { name: "What the run waits for" });
    await notice.waitFor();
    await timeAt(notice, waiting.deadline_at).waitFor();
    expect(await text(notice)).toMatch(
      /^This run waits for approval at step gate: Ship order 7\? Until someone decides, at most until .+: then the run times out \(the step's own time-out, .+, comes later\)\.$/,
    );
    await expect(timeAt(notice, waiting.steps[0].timeout_at).count()).resolves.toBe(1);
    expect(await text(step("gate", "waiting"))).toMatch(/Times out at .+ if no one decides\./);
    await screenshot(page, "54-run-waits-approval");

    const napping = await startedRun({ steps: [{ id: "nap", type: "delay", duration_ms: 7_200_000 }] });
    const delayed = await runWhen(napping.wfId, napping.runId, "the run waits", (r) => r.status === "waiting");
    const until = new Date(Date.parse(delayed.steps[0].started_at) + 7_200_000).toISOString();
    await open(napping.wfId, napping.runId);
    const delay = page.getByRole("status", { name: "What the run waits for" });
    await timeAt(delay, until).waitFor();
    expect(await text(delay)).toMatch(/^This run waits at step nap\. Until .+\.$/);
    for (const run of [asked, napping]) expect((await call("POST", `/workflows/${run.wfId}/runs/${run.runId}/cancel`)).status).toBe(200);
  });

  it("fits a 390 px screen with all of this: only the attempts tables scroll sideways, in their frames", async () => {
    const phone = await (await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true })).newPage();
    phone.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    await phone.goto(dashboard(""));
    await phone.getByLabel("Live key").fill(suite.acme.live);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.getByRole("link", { name: "Workflows" }).waitFor();
    expect(opened.length).toBeGreaterThanOrEqual(6);
    for (const hash of opened) {
      await phone.goto(dashboard(hash));
      await phone
        .getByRole("listitem", { name: /^Step / })
        .first()
        .waitFor();
      await phone.waitForLoadState("networkidle");
      const seen = await phone.evaluate(() => {
        const width = document.documentElement.clientWidth;
        const wide = Array.from(document.querySelectorAll<HTMLElement>("body *"))
          .filter((el) => !el.parentElement?.closest(".table-wrap, pre"))
          .filter((el) => el.getBoundingClientRect().right > width + 0.5)
          .map((el) => `${el.tagName.toLowerCase()}.${el.className}`);
        return { scrollWidth: document.documentElement.scrollWidth, wide };
      });
      expect({ hash, ...seen }).toEqual({ hash, scrollWidth: 390, wide: [] });
    }
    await screenshot(phone, "55-run-attempts-phone");
    await phone.context().close();
  });
});
