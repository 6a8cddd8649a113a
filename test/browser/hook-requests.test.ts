/// <reference lib="dom" />
import { createHmac, randomUUID } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, newPage, screenshot } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * A webhook-triggered workflow's page, in a real headless Chromium: the hook's URL and counts, and
 * its recent requests from real signed and forged requests, the accepted one linked to its run,
 * the refused one with its reason, a new one appearing while the page is open.
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000" });
let browser: Browser;
let page: Page;
const problems: string[] = [];

const origin = () => suite.p.baseUrl.replace(/\/v1$/, "");
const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key: suite.acme.live, body });

jest.setTimeout(60_000);

beforeAll(async () => {
  browser = await launchChromium();
  page = await newPage(browser, problems);
  await page.goto(`${origin()}/dashboard/`);
  await page.getByLabel("Live key").fill(suite.acme.live);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Workflows" }).waitFor();
});

afterAll(() => browser?.close());
afterEach(() => expect(problems).toEqual([]));

describe("the hook section of a workflow's page", () => {
  it("shows the URL, the counts and the recent requests, each with its run or its reason", async () => {
    const created = await call("POST", "/workflows", {
      name: "GitHub pushes",
      trigger: {
        type: "webhook",
        verify: { scheme: "github" },
        dedupe: { header: "x-github-delivery" },
        filter: "request.body.ref != 'refs/heads/scratch'",
      },
      steps: [{ id: "note", type: "set", output: { ref: "{{ input.request.body.ref }}" } }],
    });
    expect(created.status).toBe(201);
    const wf = created.body.data as { id: string; hook: { url: string }; hook_secret: string };
    const send = (body: unknown, secret = wf.hook_secret, delivery: string = randomUUID()) => {
      const raw = JSON.stringify(body);
      return api(suite.p.baseUrl, "POST", wf.hook.url.replace(/^\/v1/, ""), {
        raw,
        headers: {
          "content-type": "application/json",
          "x-github-delivery": delivery,
          "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`,
        },
      });
    };
    const accepted = await send({ ref: "refs/heads/main" }, wf.hook_secret, "delivery-1");
    expect(accepted.status).toBe(202);
    expect((await send({ ref: "refs/heads/main" }, wf.hook_secret, "delivery-1")).status).toBe(200);
    expect((await send({ ref: "refs/heads/scratch" })).body.data.filtered).toBe(true);
    expect((await send({ ref: "refs/heads/main" }, "forged")).status).toBe(401);
    await waitFor("four requests stored", async () => (await call("GET", `/workflows/${wf.id}/hook/requests`)).body.meta.total === 4);
    await waitFor("the counts stored", async () => (await call("GET", `/workflows/${wf.id}`)).body.data.hook.refused === 1);

    await page.goto(`${origin()}/dashboard/#/workflows/${wf.id}`);
    const section = page.getByRole("region", { name: "Inbound hook" });
    await expect(section.getByLabel("Hook URL").textContent()).resolves.toBe(`${origin()}${wf.hook.url}`);
    await expect(section.getByLabel("Hook counts").textContent()).resolves.toBe("1 accepted · 1 duplicates · 1 filtered · 1 refused");
    const rows = section.locator("tbody tr");
    await rows.nth(3).waitFor();
    await expect(rows.count()).resolves.toBe(4);
    const texts = await rows.evaluateAll((trs) =>
      trs.map((tr) =>
        Array.from(tr.querySelectorAll("td"))
          .slice(1, 4)
          .map((td) => td.textContent),
      ),
    );
    const runId = accepted.body.data.run_id as string;
    expect(texts).toEqual([
      ["refused", "401", "bad_signature: the signature does not match the body (wrong secret, or a changed body)"],
      ["filtered", "200", "the filter passed over it: no run"],
      ["duplicate", "200", `repeated a dedupe key: answered with the first run ${runId}`],
      ["accepted", "202", `started run ${runId}`],
    ]);
    await screenshot(page, "71-hook-requests");

    // A request sent while the page is open shows up on its own.
    expect((await send({ ref: "refs/heads/main" }, "forged again")).status).toBe(401);
    await rows.nth(4).waitFor();
    await section.getByLabel("Hook counts").getByText("2 refused").waitFor();

    await rows.nth(4).getByRole("link", { name: runId }).click();
    await page.waitForURL(`**/#/workflows/${wf.id}/runs/${runId}`);
  });
});
