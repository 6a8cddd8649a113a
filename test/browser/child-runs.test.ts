/// <reference lib="dom" />
import type { Browser, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * A child run's page in a real headless Chromium against the whole platform: it says which run and
 * step started it, shows its output once it succeeded, and says when it was cancelled with its parent.
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

async function workflow(steps: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
  const res = await call("POST", "/workflows", { name: "wf", trigger: { type: "manual" }, steps, ...extra });
  expect(res.status).toBe(201);
  return res.body.data.id;
}
async function childOf(runId: string, status: string): Promise<any> {
  let child: any;
  await waitFor(`the child to be ${status}`, async () => {
    child = (await call("GET", `/runs?parent_run_id=${runId}`)).body.data[0];
    return child?.status === status;
  });
  return child;
}

describe("a child run's page", () => {
  it("names the parent run and step that started it, and shows its output", async () => {
    const price = await workflow([{ id: "calc", type: "set", output: 1 }], { output: { total: 42 } });
    const order = await workflow([{ id: "charge", type: "run_workflow", workflow_id: price }]);
    const run = (await call("POST", `/workflows/${order}/runs`, { input: {} })).body.data.id as string;
    const child = await childOf(run, "succeeded");
    await page.goto(dashboard(`#/workflows/${price}/runs/${child.id}`));
    const facts = page.locator("dl.facts");
    await facts.getByText(`step charge of run ${run}`).waitFor();
    await expect(facts.getByText('{"total":42}').isVisible()).resolves.toBe(true);
    await screenshot(page, "30-child-run");
  });

  it("shows a parent waiting for its child, and the child cancelled with its parent", async () => {
    const leaf = await workflow([{ id: "ok", type: "approval" }]);
    const top = await workflow([{ id: "call", type: "run_workflow", workflow_id: leaf }]);
    const run = (await call("POST", `/workflows/${top}/runs`, { input: {} })).body.data.id as string;
    const waiting = await childOf(run, "waiting");
    await waitFor("the parent to wait", async () => (await call("GET", `/workflows/${top}/runs/${run}`)).body.data.status === "waiting");
    await page.goto(dashboard(`#/workflows/${top}/runs/${run}`));
    await page.getByRole("status", { name: "What the run waits for" }).getByText(`for its child run ${waiting.id}`).waitFor();
    expect((await call("POST", `/workflows/${top}/runs/${run}/cancel`)).status).toBe(200);
    const child = await childOf(run, "cancelled");
    await page.goto(dashboard(`#/workflows/${leaf}/runs/${child.id}`));
    await page.locator("dl.facts").getByText("with its parent run").waitFor();
  });
});
