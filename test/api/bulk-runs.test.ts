import { createServer, type Server } from "node:http";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";

/** POST /runs/bulk through HTTP: a stored job retrying, rerunning or cancelling the runs a filter picks, a batch at a time. */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20", RATE_LIMIT_MAX: "1000000" });
const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

/** A real http step target on 127.0.0.1 answering `status()`. */
let target: { url: string; status: () => number; server: Server };
beforeAll(async () => {
  const t = { status: () => 200 } as typeof target;
  t.server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(t.status(), { "content-type": "application/json" }).end("{}"));
  });
  await new Promise<void>((ok) => t.server.listen(0, "127.0.0.1", ok));
  t.url = `http://127.0.0.1:${(t.server.address() as { port: number }).port}/step`;
  target = t;
});
afterAll(async () => {
  target.server.closeAllConnections();
  await new Promise((ok) => target.server.close(ok));
});

async function workflow(name: string, steps: unknown[]) {
  const res = await call("POST", "/workflows", { name, trigger: { type: "manual" }, steps });
  expect(res.status).toBe(201);
  return res.body.data as { id: string };
}
async function startMany(wfId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, n - i) }, (_, j) => call("POST", `/workflows/${wfId}/runs`, { input: { i: i + j } })),
    );
    for (const res of batch) {
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
  }
  return ids;
}
const countOf = async (wfId: string, status: string) =>
  (await call("GET", `/workflows/${wfId}/runs?status=${status}&per_page=1`)).body.meta.total as number;

/** Polls the job until it ends; answers it and every `done` seen on the way. */
async function follow(jobId: string, timeoutMs = 60_000) {
  const seen: number[] = [];
  let job: any;
  await waitFor(
    `bulk job ${jobId} ended`,
    async () => {
      job = (await call("GET", `/runs/bulk/${jobId}`)).body.data;
      seen.push(job.done);
      return job.status !== "running";
    },
    timeoutMs,
  );
  return { job, seen };
}

describe("bulk operations on runs", () => {
  it("cancels 300 waiting runs of a workflow in batches, each once, by the calling key", async () => {
    const wf = await workflow("bulk-cancel", [{ id: "gate", type: "approval", message: "ok?" }]);
    await startMany(wf.id, 300);
    await waitFor("300 runs waiting", async () => (await countOf(wf.id, "waiting")) === 300, 60_000);

    const res = await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: wf.id } });
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({
      object: "bulk_job",
      action: "cancel",
      status: "running",
      total: 300,
      filter: { workflow_id: wf.id },
    });
    // One running job per environment.
    expectError(await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: wf.id } }), 409, "invalid_state", "action");
    const { job, seen } = await follow(res.body.data.id);
    expect(job).toMatchObject({ status: "succeeded", matched: 300, done: 300, failed: 0, last_error: null });
    console.log(`bulk cancel of 300 runs: ${Date.parse(job.finished_at) - Date.parse(job.created_at)} ms (6 batches of 50, 250 ms apart)`);
    // Batches of 50 with a pause between them: the job was seen part-way.
    expect(seen.some((d) => d > 0 && d < 300)).toBe(true);
    expect(await countOf(wf.id, "cancelled")).toBe(300);
    const one = (await call("GET", `/workflows/${wf.id}/runs?per_page=1`)).body.data[0];
    expect(one).toMatchObject({ status: "cancelled", cancel_reason: "requested", cancelled_by: { key_id: job.created_by.key_id } });
    // Listed, newest first; a job that ended cannot be cancelled.
    expect((await call("GET", "/runs/bulk")).body.data[0].id).toBe(job.id);
    expectError(await call("POST", `/runs/bulk/${job.id}/cancel`), 409, "invalid_state", "job_id");
  }, 120_000);

  it("retries 300 failed runs picked by failed step, leaving other workflows' runs alone", async () => {
    target.status = () => 500;
    const wf = await workflow("bulk-retry", [
      { id: "call", type: "http", method: "POST", url: target.url, retries: 0 },
      { id: "after", type: "set", output: { ok: true } },
    ]);
    const other = await workflow("bulk-retry-other", [{ id: "call", type: "http", method: "POST", url: target.url, retries: 0 }]);
    await startMany(wf.id, 300);
    await startMany(other.id, 3);
    await waitFor(
      "303 runs failed",
      async () => (await countOf(wf.id, "failed")) === 300 && (await countOf(other.id, "failed")) === 3,
      90_000,
    );
    target.status = () => 200;

    const res = await call("POST", "/runs/bulk", {
      action: "retry",
      filter: { workflow_id: wf.id, status: "failed", failed_step: "call" },
    });
    expect(res.status).toBe(202);
    const { job, seen } = await follow(res.body.data.id);
    expect(job).toMatchObject({ status: "succeeded", matched: 300, done: 300, failed: 0 });
    expect(seen.some((d) => d > 0 && d < 300)).toBe(true);
    await waitFor("300 retried runs succeeded", async () => (await countOf(wf.id, "succeeded")) === 300, 60_000);
    const one = (await call("GET", `/workflows/${wf.id}/runs?per_page=1`)).body.data[0];
    expect(one).toMatchObject({ status: "succeeded", attempt: 2 });
    expect(await countOf(other.id, "failed")).toBe(3);
  }, 180_000);

  it("reruns the runs of a time range, and a job can be cancelled", async () => {
    const wf = await workflow("bulk-rerun", [{ id: "s", type: "set", output: { x: "{{input.i}}" } }]);
    const since = new Date().toISOString();
    const old = await startMany(wf.id, 5);
    await waitFor("5 runs succeeded", async () => (await countOf(wf.id, "succeeded")) === 5);
    const res = await call("POST", "/runs/bulk", { action: "rerun", filter: { created_after: since, workflow_id: wf.id } });
    expect(res.status).toBe(202);
    const { job } = await follow(res.body.data.id);
    expect(job).toMatchObject({ status: "succeeded", matched: 5, done: 5 });
    await waitFor("10 runs succeeded", async () => (await countOf(wf.id, "succeeded")) === 10);
    const runs = (await call("GET", `/workflows/${wf.id}/runs?per_page=10`)).body.data as any[];
    expect(
      runs
        .filter((r) => r.rerun_of)
        .map((r) => r.rerun_of)
        .sort(),
    ).toEqual([...old].sort());

    // A job cancelled at once stops (its batch under way, if any, finishes).
    const gate = await workflow("bulk-stop", [{ id: "gate", type: "approval" }]);
    await startMany(gate.id, 3);
    const started = await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: gate.id, status: "waiting" } });
    const stopped = await call("POST", `/runs/bulk/${started.body.data.id}/cancel`);
    expect(stopped.status).toBe(200);
    expect(stopped.body.data).toMatchObject({ status: "cancelled" });
    expect(stopped.body.data.finished_at).not.toBeNull();
  });

  it("refuses filters it cannot bound or act on, naming the field, and keeps jobs to their environment", async () => {
    expectError(await call("POST", "/runs/bulk", { action: "cancel", filter: {} }), 400, "parameter_invalid", "filter");
    expectError(await call("POST", "/runs/bulk", { action: "cancel", filter: { status: "queued" } }), 400, "parameter_invalid", "filter");
    expectError(
      await call("POST", "/runs/bulk", { action: "nuke", filter: { created_after: "2026-01-01T00:00:00Z" } }),
      400,
      "parameter_invalid",
      "action",
    );
    const wf = "wf_01jdx3kq9v7c2m5n8p4r6t0w1y";
    expectError(
      await call("POST", "/runs/bulk", { action: "retry", filter: { workflow_id: wf, status: "waiting" } }),
      400,
      "parameter_invalid",
      "filter.status",
    );
    expectError(
      await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: wf, failed_step: "a" } }),
      400,
      "parameter_invalid",
      "filter.failed_step",
    );
    expectError(
      await call("POST", "/runs/bulk", { action: "rerun", filter: { created_after: "yesterday" } }),
      400,
      "parameter_invalid",
      "filter.created_after",
    );
    expectError(
      await call("POST", "/runs/bulk", {
        action: "rerun",
        filter: { created_after: "2026-02-01T00:00:00Z", created_before: "2026-01-01T00:00:00Z" },
      }),
      400,
      "parameter_invalid",
      "filter.created_before",
    );
    expectError(await call("POST", "/runs/bulk", { action: "rerun", filter: { workflow_id: wf, extra: 1 } }), 400, "parameter_unknown");
    const job = await call("POST", "/runs/bulk", { action: "cancel", filter: { workflow_id: wf } });
    expect(job.status).toBe(202);
    expectError(await call("GET", `/runs/bulk/${job.body.data.id}`, undefined, suite.globex.live), 404, "resource_not_found", "job_id");
    expectError(
      await call("POST", `/runs/bulk/${job.body.data.id}/cancel`, undefined, suite.acme.test),
      404,
      "resource_not_found",
      "job_id",
    );
    expectError(await call("GET", "/runs/bulk/blk_01jdx3kq9v7c2m5n8p4r6t0w1y"), 404, "resource_not_found", "job_id");
  });
});

describe("retention", () => {
  it("jobs that ended go with the runs they acted on, after EVENT_RETENTION_DAYS", async () => {
    const listed = (await call("GET", "/runs/bulk?per_page=100")).body.data as any[];
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.every((j) => j.status !== "running")).toBe(true);
    await suite.p.broker.call("workflows.prune", { now: Date.now() + 400 * 86_400_000 });
    for (const job of listed) expectError(await call("GET", `/runs/bulk/${job.id}`), 404, "resource_not_found", "job_id");
  });
});
