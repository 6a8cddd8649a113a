import { createHmac, randomUUID } from "node:crypto";
import { waitFor } from "../../tools/procs";
import { HOOK_REQUESTS_KEPT, REFUSALS_KEPT_PER_FLUSH } from "../../services/workflows/hook-requests.logic";
import { api, expectError, usePlatform } from "../helpers/platform";

/**
 * A hook's recent requests (GET /workflows/{id}/hook/requests): real requests signed as GitHub
 * signs them, each kept with what became of it, newest first, the newest HOOK_REQUESTS_KEPT of a
 * workflow, and a flood of forgeries stored only in part while every one is counted.
 */
const suite = usePlatform({ RATE_LIMIT_MAX: "100000", RATE_LIMIT_ADDRESS_MAX: "1000000" });

interface HookWorkflow {
  id: string;
  hook: { id: string; url: string };
  hook_secret: string;
}

async function hookWorkflow(key: string, name = "pushes"): Promise<HookWorkflow> {
  const res = await api(suite.p.baseUrl, "POST", "/workflows", {
    key,
    body: {
      name,
      trigger: {
        type: "webhook",
        verify: { scheme: "github" },
        dedupe: { header: "x-github-delivery" },
        filter: "request.body.action != 'ignored'",
      },
      steps: [{ id: "note", type: "set", output: { action: "{{ input.request.body.action }}" } }],
    },
  });
  expect(res.status).toBe(201);
  return res.body.data;
}

/** Sends `body` to the hook signed with `secret`, as GitHub does, with a delivery id of its own unless given. */
function send(wf: HookWorkflow, body: unknown, secret = wf.hook_secret, delivery: string = randomUUID()) {
  const raw = JSON.stringify(body);
  return api(suite.p.baseUrl, "POST", wf.hook.url.replace(/^\/v1/, ""), {
    raw,
    headers: {
      "content-type": "application/json",
      "x-github-delivery": delivery,
      "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`,
    },
  });
}

const requestsOf = (key: string, wf: { id: string }, query = "") =>
  api(suite.p.baseUrl, "GET", `/workflows/${wf.id}/hook/requests${query}`, { key });

const hookOf = async (key: string, wf: { id: string }) =>
  (await api(suite.p.baseUrl, "GET", `/workflows/${wf.id}`, { key })).body.data.hook;

describe("GET /workflows/{id}/hook/requests", () => {
  it("lists accepted, duplicate, filtered and refused requests newest first, each with its run or its reason", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live);
    const accepted = await send(wf, { action: "opened" }, wf.hook_secret, "delivery-1");
    expect(accepted.status).toBe(202);
    const duplicate = await send(wf, { action: "opened" }, wf.hook_secret, "delivery-1");
    expect(duplicate.status).toBe(200);
    const filtered = await send(wf, { action: "ignored" });
    expect(filtered.body.data).toMatchObject({ filtered: true, run_id: null });
    const forged = await send(wf, { action: "opened" }, "not the secret");
    expectError(forged, 401, "invalid_signature");
    const unsigned = await api(suite.p.baseUrl, "POST", wf.hook.url.replace(/^\/v1/, ""), {
      raw: "{}",
      headers: { "content-type": "application/json" },
    });
    expectError(unsigned, 401, "invalid_signature");

    await waitFor("five requests to be stored", async () => (await requestsOf(acme.live, wf)).body.meta?.total === 5);
    const res = await requestsOf(acme.live, wf);
    expect(res.status).toBe(200);
    expect(res.body.meta).toEqual({ total: 5, page: 1, per_page: 20 });
    const base = { object: "hook_request", workflow_id: wf.id, hook_id: wf.hook.id };
    const runId = accepted.body.data.run_id;
    expect(res.body.data).toEqual([
      {
        ...base,
        id: expect.any(String),
        outcome: "refused",
        status: 401,
        run_id: null,
        reason: "missing_signature",
        request_id: unsigned.headers["request-id"],
        received_at: expect.any(String),
      },
      {
        ...base,
        id: expect.any(String),
        outcome: "refused",
        status: 401,
        run_id: null,
        reason: "bad_signature",
        request_id: forged.headers["request-id"],
        received_at: expect.any(String),
      },
      {
        ...base,
        id: expect.any(String),
        outcome: "filtered",
        status: 200,
        run_id: null,
        reason: null,
        request_id: filtered.headers["request-id"],
        received_at: expect.any(String),
      },
      {
        ...base,
        id: expect.any(String),
        outcome: "duplicate",
        status: 200,
        run_id: runId,
        reason: null,
        request_id: duplicate.headers["request-id"],
        received_at: expect.any(String),
      },
      {
        ...base,
        id: expect.any(String),
        outcome: "accepted",
        status: 202,
        run_id: runId,
        reason: null,
        request_id: accepted.headers["request-id"],
        received_at: expect.any(String),
      },
    ]);
    const times = res.body.data.map((r: { received_at: string }) => Date.parse(r.received_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(await hookOf(acme.live, wf)).toMatchObject({ accepted: 1, duplicates: 1, filtered: 1, refused: 2 });
  });

  it("pages by number and by cursor as every list does, naming a bad parameter", async () => {
    const { acme } = suite;
    const wf = await hookWorkflow(acme.live, "paged");
    for (let i = 0; i < 5; i++) expect((await send(wf, { action: "ignored" })).status).toBe(200);
    await waitFor("five requests to be stored", async () => (await requestsOf(acme.live, wf)).body.meta?.total === 5);
    const all = (await requestsOf(acme.live, wf)).body.data.map((r: { id: string }) => r.id);
    const second = await requestsOf(acme.live, wf, "?page=2&per_page=2");
    expect(second.body.data.map((r: { id: string }) => r.id)).toEqual(all.slice(2, 4));
    expect(second.body.meta).toEqual({ total: 5, page: 2, per_page: 2 });
    const after = await requestsOf(acme.live, wf, `?limit=2&starting_after=${all[1]}`);
    expect(after.body.data.map((r: { id: string }) => r.id)).toEqual(all.slice(2, 4));
    expect(after.body.meta).toEqual({ total: 5, limit: 2, has_more: true });
    expectError(await requestsOf(acme.live, wf, "?per_page=101"), 400, "parameter_invalid", "per_page");
    expectError(await requestsOf(acme.live, wf, "?colour=red"), 400, "parameter_unknown", "colour");
  });

  it("answers 404 for a workflow that does not exist or is another tenant's, and an empty list for one without a hook", async () => {
    const { acme, globex } = suite;
    const wf = await hookWorkflow(acme.live, "private");
    expectError(await requestsOf(globex.live, wf), 404, "resource_not_found", "id");
    expectError(await requestsOf(acme.test, wf), 404, "resource_not_found", "id");
    expectError(await requestsOf(acme.live, { id: "wf_01jdx3kq9v7c2m5n8p4r6t0w1y" }), 404, "resource_not_found", "id");
    const manual = await api(suite.p.baseUrl, "POST", "/workflows", {
      key: acme.live,
      body: { name: "manual", trigger: { type: "manual" }, steps: [{ id: "a", type: "set", output: 1 }] },
    });
    const none = await requestsOf(acme.live, manual.body.data);
    expect(none.body).toEqual({ object: "list", data: [], meta: { total: 0, page: 1, per_page: 20 } });
  });

  it(`keeps the newest ${HOOK_REQUESTS_KEPT} of a workflow`, async () => {
    const { globex } = suite;
    const wf = await hookWorkflow(globex.live, "busy");
    const sent = HOOK_REQUESTS_KEPT + 20;
    let last: string | undefined;
    for (let i = 0; i < sent; i++) {
      const res = await send(wf, { action: "ignored" });
      expect(res.status).toBe(200);
      last = res.headers["request-id"] as string;
    }
    await waitFor("every request to be counted", async () => (await hookOf(globex.live, wf)).filtered === sent);
    await waitFor("the oldest to be pruned", async () => (await requestsOf(globex.live, wf)).body.meta.total === HOOK_REQUESTS_KEPT);
    const newest = await requestsOf(globex.live, wf, "?per_page=1");
    expect(newest.body.data[0].request_id).toBe(last);
  });

  it("stores a flood of forgeries only in part, while counting every one", async () => {
    const { globex } = suite;
    const wf = await hookWorkflow(globex.live, "flooded");
    const forgeries = 300;
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: forgeries }, () => send(wf, { action: "opened" }, "forged")));
    const tookMs = Date.now() - started;
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([401]));
    await waitFor("every forgery to be counted", async () => (await hookOf(globex.live, wf)).refused === forgeries);
    // A flush stores the counts, then the records: wait for the records themselves.
    let stored = 0;
    await waitFor("the flood's records to be stored", async () => (stored = (await requestsOf(globex.live, wf)).body.meta.total) >= 1);
    // At most REFUSALS_KEPT_PER_FLUSH for each flush the flood spanned (one a second, and the one after it).
    expect(stored).toBeGreaterThanOrEqual(1);
    expect(stored).toBeLessThanOrEqual(REFUSALS_KEPT_PER_FLUSH * (Math.ceil(tookMs / 1000) + 1));
    expect(stored).toBeLessThan(forgeries);
  });
});
