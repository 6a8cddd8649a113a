/// <reference lib="dom" />
import type { Browser, Locator, Page } from "playwright-core";
import { waitFor } from "../../tools/procs";
import { launchChromium, newPage, screenshot, signIn } from "../helpers/browser";
import { api, usePlatform } from "../helpers/platform";

/**
 * A run drawn as a graph, and its workflow's definition drawn the same way, in a real headless
 * Chromium against the whole platform: a step skipped by its condition, a parallel's two branches
 * with their child runs, a run_workflow's child opened from the graph, a wait_for_event with what
 * it waits for and until when, and a map's children counted and listed up to a bound, the rest a
 * link away. Screenshots land in test-artifacts/dashboard/.
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
  page = await newPage(browser, problems);
  await signIn(page, dashboard(""), { live: suite.acme.live, test: suite.acme.test });
});

afterAll(() => browser?.close());
afterEach(() => expect(problems).toEqual([]));

async function workflow(name: string, steps: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
  const res = await call("POST", "/workflows", { name, trigger: { type: "manual" }, steps, ...extra });
  expect(res.status).toBe(201);
  return res.body.data.id;
}
async function runWhen(wfId: string, runId: string, what: string, done: (run: any) => boolean): Promise<any> {
  let run: any;
  await waitFor(what, async () => done((run = (await call("GET", `/workflows/${wfId}/runs/${runId}`)).body.data)), 15_000);
  return run;
}

const text = async (l: Locator) => ((await l.textContent()) ?? "").replace(/\s+/g, " ").trim();
/** A step's box in the graph named `graph`, by its accessible name (`id (type): status`). */
const node = (graph: string, name: string) => page.getByRole("figure", { name: graph }).getByRole("listitem", { name, exact: true });

describe("the run graph", () => {
  let leaf: string;
  let order: string;
  let runId: string;
  let child: any;

  it("draws each step with its status: the skipped one and why, both branches with their children, the child, and the wait", async () => {
    leaf = await workflow("Price", [{ id: "calc", type: "set", output: 1 }], { output: { total: 42 } });
    order = await workflow("Order", [
      { id: "start", type: "set", output: { amount: "{{ input.amount }}" } },
      { id: "review", type: "approval", message: "Refund?", if: "input.amount >= 500" },
      {
        id: "both",
        type: "parallel",
        branches: {
          crm: [{ id: "contact", type: "set", output: { crm: 1 } }],
          billing: [{ id: "account", type: "set", output: { billing: 1 } }],
        },
      },
      { id: "price", type: "run_workflow", workflow_id: leaf },
      {
        id: "pay",
        type: "wait_for_event",
        event_type: "payment.succeeded",
        match: { "data.order_id": "{{ input.order_id }}" },
        timeout_ms: 3_600_000,
      },
      { id: "ship", type: "emit", event_type: "order.ship", data: {} },
    ]);
    const started = await call("POST", `/workflows/${order}/runs`, { input: { amount: 120, order_id: "o_42" } });
    runId = started.body.data.id;
    const run = await runWhen(order, runId, "the run waits for the payment", (r) => r.steps[4].status === "waiting");
    const pay = run.steps[4];
    expect(pay.waiting_for).toEqual({ event_type: "payment.succeeded", match: { "data.order_id": "o_42" } });
    child = (await call("GET", `/runs?parent_run_id=${runId}`)).body.data.find((c: any) => c.parent.step_id === "price");
    expect(child).toMatchObject({ workflow_id: leaf, status: "succeeded" });

    await page.goto(dashboard(`#/workflows/${order}/runs/${runId}`));
    const graph = page.getByRole("figure", { name: "Run graph" });
    await graph.waitFor();

    const review = node("Run graph", "review (approval): skipped");
    expect(await review.getAttribute("data-status")).toBe("skipped");
    expect(await text(review.locator(".g-skip"))).toBe("Skipped: its condition was false (if: input.amount >= 500).");

    const both = node("Run graph", "both (parallel): succeeded");
    for (const [branch, step] of [
      ["crm", "contact"],
      ["billing", "account"],
    ]) {
      const lane = both.getByRole("listitem", { name: `Branch ${branch}` });
      await lane.getByRole("listitem", { name: `${step} (set): succeeded` }).waitFor();
      // The branch's child run, linked, with its status.
      const link = lane.locator(".g-lane-head a");
      expect(await text(lane.locator(".g-lane-head"))).toMatch(new RegExp(`^${branch} run_\\w+ succeeded$`));
      expect(await link.getAttribute("href")).toMatch(new RegExp(`^#/workflows/${order}/runs/run_\\w+$`));
    }

    const waiting = node("Run graph", "pay (wait_for_event): waiting");
    const note = waiting.locator(".g-wait");
    expect(await text(note)).toMatch(/^Waits for payment\.succeeded with \{"data\.order_id":"o_42"\}, until .+\.$/);
    await expect(note.locator(`time[datetime="${pay.timeout_at}"]`).count()).resolves.toBe(1);
    expect(await node("Run graph", "ship (emit): pending").getAttribute("data-status")).toBe("pending");

    // Each step is a focusable element of its own.
    await waiting.focus();
    expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("pay (wait_for_event): waiting");
    await screenshot(page, "60-run-graph-waiting");
  });

  it("opens the child run from its step in the graph", async () => {
    const price = node("Run graph", "price (run_workflow): succeeded");
    expect(await text(price.locator(".g-child-line"))).toBe(`Child run ${child.id} succeeded`);
    await price.getByRole("link", { name: child.id }).click();
    await page.getByRole("heading", { name: `Run ${child.id}` }).waitFor();
    expect(new URL(page.url()).hash).toBe(`#/workflows/${leaf}/runs/${child.id}`);
    await page.locator("dl.facts").getByText(`step price of run ${runId}`).waitFor();
  });

  it("opens a branch's child run from the graph, which draws the branch's steps alone", async () => {
    await page.goto(dashboard(`#/workflows/${order}/runs/${runId}`));
    const crm = node("Run graph", "both (parallel): succeeded").getByRole("listitem", { name: "Branch crm" });
    const branchRun = await text(crm.locator(".g-lane-head a"));
    await crm.getByRole("link", { name: branchRun }).click();
    await page.getByRole("heading", { name: `Run ${branchRun}` }).waitFor();
    await node("Run graph", "contact (set): succeeded").waitFor();
    await expect(page.getByRole("figure", { name: "Run graph" }).locator(".g-node").count()).resolves.toBe(1);
    await page.locator("dl.facts").getByText(`step both of run ${runId}`).waitFor();
  });

  it("shows the wait resolved once its event comes, and the run through", async () => {
    expect((await call("POST", "/events", { type: "payment.succeeded", data: { order_id: "o_42" } })).status).toBe(201);
    await runWhen(order, runId, "the run succeeds", (r) => r.status === "succeeded");
    await page.goto(dashboard(`#/workflows/${order}/runs/${runId}`));
    const pay = node("Run graph", "pay (wait_for_event): succeeded");
    await pay.waitFor();
    expect(await text(pay.locator(".g-wait"))).toBe('Waited for payment.succeeded with {"data.order_id":"o_42"}.');
    await node("Run graph", "ship (emit): succeeded").waitFor();
  });

  it("draws the definition the same way on the workflow page, without statuses", async () => {
    await page.goto(dashboard(`#/workflows/${order}`));
    const graph = page.getByRole("figure", { name: "Workflow graph" });
    await graph.waitFor();
    const names = await graph
      .locator(".g-node")
      .evaluateAll((els) => els.map((e) => [e.getAttribute("aria-label"), e.getAttribute("data-status")]));
    expect(names).toEqual(
      [
        "start (set)",
        "review (approval)",
        "both (parallel)",
        "contact (set)",
        "account (set)",
        "price (run_workflow)",
        "pay (wait_for_event)",
        "ship (emit)",
      ].map((n) => [n, "defined"]),
    );
    expect(await text(node("Workflow graph", "review (approval)").locator(".g-if"))).toBe("Only if: input.amount >= 500");
    await graph.getByRole("listitem", { name: "Branch crm" }).getByRole("listitem", { name: "contact (set)" }).waitFor();
    await graph.getByRole("listitem", { name: "Branch billing" }).getByRole("listitem", { name: "account (set)" }).waitFor();
    const pay = node("Workflow graph", "pay (wait_for_event)");
    expect(await text(pay.locator(".g-wait"))).toBe(
      'Waits for payment.succeeded with {"data.order_id":"{{ input.order_id }}"}, at most 1 h.',
    );
    await expect(graph.locator(".status").count()).resolves.toBe(0);
    await node("Workflow graph", "price (run_workflow)").getByRole("link", { name: leaf }).waitFor();
    await screenshot(page, "61-workflow-graph");
  });
});

describe("a parallel in the run graph while its branches run", () => {
  it("shows each branch's child run and its steps as they are, and follows them to the end", async () => {
    const wf = await workflow("Branches", [
      {
        id: "both",
        type: "parallel",
        branches: {
          crm: [{ id: "ok", type: "approval", message: "Sync the contact?" }],
          billing: [{ id: "account", type: "set", output: 1 }],
        },
      },
    ]);
    const runId = (await call("POST", `/workflows/${wf}/runs`, { input: {} })).body.data.id;
    let crm: any;
    await waitFor("the crm branch waits for approval", async () => {
      const children = (await call("GET", `/runs?parent_run_id=${runId}`)).body.data;
      crm = children.find((c: any) => c.parent.index === 0);
      return crm?.status === "waiting" && children.some((c: any) => c.parent.index === 1 && c.status === "succeeded");
    });
    await page.goto(dashboard(`#/workflows/${wf}/runs/${runId}`));
    const both = node("Run graph", "both (parallel): waiting");
    const lane = both.getByRole("listitem", { name: "Branch crm" });
    await lane.getByRole("listitem", { name: "ok (approval): waiting" }).waitFor();
    expect(await text(lane.locator(".g-lane-head"))).toBe(`crm ${crm.id} waiting`);
    expect(await text(lane.locator(".g-wait"))).toBe("Waits for a person's decision.");
    await both.getByRole("listitem", { name: "Branch billing" }).getByRole("listitem", { name: "account (set): succeeded" }).waitFor();
    expect(await text(both.locator(":scope > .g-counts"))).toBe("2 branches: 1 succeeded, 1 running");

    // Approved on the branch's own run, the graph follows without a reload.
    expect((await call("POST", `/workflows/${wf}/runs/${crm.id}/approve`)).status).toBe(200);
    await node("Run graph", "both (parallel): succeeded")
      .getByRole("listitem", { name: "ok (approval): succeeded" })
      .waitFor({ timeout: 15_000 });
    expect(
      await text(node("Run graph", "both (parallel): succeeded").getByRole("listitem", { name: "Branch crm" }).locator(".g-lane-head")),
    ).toBe(`crm ${crm.id} succeeded`);
  });
});

describe("a map in the run graph", () => {
  it("counts its children by status and lists a bounded few, the rest on the children list", async () => {
    const items = Array.from({ length: 14 }, (_, i) => i);
    const wf = await workflow("Each", [
      {
        id: "each",
        type: "map",
        items: "{{ input.items }}",
        max_concurrency: 5,
        steps: [{ id: "double", type: "set", output: "{{ input.item * 2 }}" }],
      },
    ]);
    const runId = (await call("POST", `/workflows/${wf}/runs`, { input: { items } })).body.data.id;
    await runWhen(wf, runId, "the map ends", (r) => r.status === "succeeded");
    await page.goto(dashboard(`#/workflows/${wf}/runs/${runId}`));

    const each = node("Run graph", "each (map): succeeded");
    await each.getByRole("list", { name: "Children of each" }).waitFor();
    expect(await text(each.locator(".g-counts"))).toBe("14 children: 14 succeeded");
    const listed = each.getByRole("list", { name: "Children of each" }).getByRole("listitem");
    await expect(listed.count()).resolves.toBe(10);
    expect(await text(listed.first())).toMatch(/^#0 run_\w+ succeeded$/);
    expect(await text(listed.last())).toMatch(/^#9 run_\w+ succeeded$/);
    // The steps each item runs, drawn inside the map without statuses.
    await each.getByRole("listitem", { name: "Each item" }).getByRole("listitem", { name: "double (set)", exact: true }).waitFor();
    await screenshot(page, "62-run-graph-map");

    await each.getByRole("link", { name: "All 14 children" }).click();
    await page.getByRole("heading", { name: `Child runs of ${runId}` }).waitFor();
    const rows = page.locator("tbody tr");
    await waitFor("the 14 children listed", async () => (await rows.count()) === 14);
    const indexes = await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.querySelectorAll("td")[2]?.textContent)));
    expect([...indexes].sort((a, b) => a - b)).toEqual(items);
    await rows.first().getByRole("link").click();
    await page.getByRole("heading", { name: /^Run run_/ }).waitFor();
    expect(new URL(page.url()).hash).toMatch(new RegExp(`^#/workflows/${wf}/runs/run_\\w+$`));
  });

  it("fits a 390 px screen: branches stack rather than run off the side", async () => {
    const phone = await (await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true })).newPage();
    phone.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    await phone.goto(dashboard(""));
    await phone.getByLabel("Live key").fill(suite.acme.live);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.getByRole("link", { name: "Workflows" }).waitFor();
    const runs = (await call("GET", "/runs?per_page=100")).body.data.filter((r: any) => !r.parent);
    expect(runs.length).toBe(3);
    for (const run of runs) {
      await phone.goto(dashboard(`#/workflows/${run.workflow_id}/runs/${run.id}`));
      await phone.getByRole("figure", { name: "Run graph" }).waitFor();
      await phone.waitForLoadState("networkidle");
      const seen = await phone.evaluate(() => {
        const width = document.documentElement.clientWidth;
        const wide = Array.from(document.querySelectorAll<HTMLElement>("body *"))
          .filter((el) => !el.parentElement?.closest(".table-wrap, pre"))
          .filter((el) => el.getBoundingClientRect().right > width + 0.5)
          .map((el) => `${el.tagName.toLowerCase()}.${el.className}`);
        return { scrollWidth: document.documentElement.scrollWidth, wide };
      });
      expect({ run: run.id, ...seen }).toEqual({ run: run.id, scrollWidth: 390, wide: [] });
    }
    await screenshot(phone, "63-run-graph-phone");
    await phone.context().close();
  });
});

describe("the run graph reads each step's own children", () => {
  it("lists a map's items #0 to #9 and a branch's steps when 25 newer children came after them, and a map inside a branch", async () => {
    const square = [{ id: "sq", type: "set", output: "{{ input.item * input.item }}" }];
    const wf = await workflow("Older first", [
      {
        id: "both",
        type: "parallel",
        branches: {
          crm: [{ id: "contact", type: "set", output: { crm: 1 } }],
          bulk: [{ id: "inner", type: "map", items: [0, 1, 2, 3], max_concurrency: 2, steps: square }],
        },
      },
      { id: "first", type: "map", items: "{{ input.first }}", max_concurrency: 5, steps: square },
      { id: "later", type: "map", items: "{{ input.later }}", max_concurrency: 10, steps: square },
    ]);
    const range = (n: number) => Array.from({ length: n }, (_, i) => i);
    const runId = (await call("POST", `/workflows/${wf}/runs`, { input: { first: range(14), later: range(30) } })).body.data.id;
    await runWhen(wf, runId, "the run ends", (r) => r.status === "succeeded");
    // The run's newest 25 children are all the later map's: the others are older than a page of them.
    const newest = (await call("GET", `/runs?parent_run_id=${runId}&per_page=25`)).body.data;
    expect(new Set(newest.map((c: any) => c.parent.step_id))).toEqual(new Set(["later"]));

    await page.goto(dashboard(`#/workflows/${wf}/runs/${runId}`));
    const listed = async (node: Locator, id: string) => {
      const items = node.getByRole("list", { name: `Children of ${id}` }).getByRole("listitem");
      await items.first().waitFor();
      return (await items.evaluateAll((lis) => lis.map((li) => li.textContent ?? ""))).map((t) => t.replace(/\s+/g, " ").trim());
    };
    const first = node("Run graph", "first (map): succeeded");
    const shown = await listed(first, "first");
    expect(shown.map((t) => t.split(" ")[0])).toEqual(range(10).map((i) => `#${i}`));
    expect(shown.every((t) => / run_\w+ succeeded$/.test(t))).toBe(true);
    expect(await text(first.locator(".g-counts"))).toBe("14 children: 14 succeeded");

    const both = node("Run graph", "both (parallel): succeeded");
    await both.getByRole("listitem", { name: "Branch crm" }).getByRole("listitem", { name: "contact (set): succeeded" }).waitFor();
    const inner = both.getByRole("listitem", { name: "Branch bulk" }).getByRole("listitem", { name: "inner (map): succeeded" });
    expect((await listed(inner, "inner")).map((t) => t.replace(/run_\w+/, "run"))).toEqual(range(4).map((i) => `#${i} run succeeded`));
    // Its children are the branch run's: the link lists them there.
    const bulkRun = await text(both.getByRole("listitem", { name: "Branch bulk" }).locator(".g-lane-head a"));
    expect(await inner.getByRole("link", { name: "The children list" }).getAttribute("href")).toBe(
      `#/workflows/${wf}/runs/${bulkRun}/children`,
    );
    await screenshot(page, "64-run-graph-older-children");
  });
});
