import { createServer, type Server } from "node:http";
import { waitFor } from "../../tools/procs";
import { api, expectError, usePlatform } from "../helpers/platform";

/** POST …/rerun with `from_step` and `input`, through HTTP: the steps before it are copied, not done again. */
const suite = usePlatform({ WEBHOOK_ALLOW_PRIVATE_TARGETS: "true", WORKFLOW_RETRY_BASE_MS: "20" });
const call = (method: string, path: string, body?: unknown, key = suite.acme.live) => api(suite.p.baseUrl, method, path, { key, body });

/** A real http step target on 127.0.0.1 that echoes the body it gets and answers `status()`, counting requests. */
let target: { url: string; hits: number; status: () => number; server: Server };
beforeAll(async () => {
  const t = { hits: 0, status: () => 200 } as typeof target;
  t.server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      t.hits += 1;
      res.writeHead(t.status(), { "content-type": "application/json" }).end(JSON.stringify({ n: t.hits, got: JSON.parse(body || "null") }));
    });
  });
  await new Promise<void>((ok) => t.server.listen(0, "127.0.0.1", ok));
  t.url = `http://127.0.0.1:${(t.server.address() as { port: number }).port}/step`;
  target = t;
});
afterAll(async () => {
  target.server.closeAllConnections();
  await new Promise((ok) => target.server.close(ok));
});

async function ended(wfId: string, runId: string) {
  let run: any;
  await waitFor(`run ${runId} ended`, async () => {
    run = (await call("GET", `/workflows/${wfId}/runs/${runId}`)).body.data;
    return ["succeeded", "failed", "cancelled"].includes(run.status);
  });
  return run;
}

describe("rerun from a step", () => {
  it("copies the earlier steps' outputs, marked copied_from, and runs the rest with a new input", async () => {
    target.hits = 0;
    target.status = () => (target.hits === 2 ? 500 : 200);
    const created = await call("POST", "/workflows", {
      name: "rerun-from",
      trigger: { type: "manual" },
      steps: [
        { id: "fetch", type: "http", method: "POST", url: target.url, body: { order: "{{input.order}}" }, retries: 0 },
        {
          id: "charge",
          type: "http",
          method: "POST",
          url: target.url,
          body: { n: "{{steps.fetch.output.body.n}}", order: "{{input.order}}" },
          retries: 0,
        },
      ],
    });
    const wf = created.body.data;
    const run = (await call("POST", `/workflows/${wf.id}/runs`, { input: { order: "o-1" } })).body.data;
    const failed = await ended(wf.id, run.id);
    expect(failed.steps.map((s: any) => s.status)).toEqual(["succeeded", "failed"]);
    expect(target.hits).toBe(2);

    const res = await call("POST", `/workflows/${wf.id}/runs/${run.id}/rerun`, { from_step: "charge", input: { order: "o-2" } });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ rerun_of: run.id, input: { order: "o-2" } });
    expect(res.body.data.steps[0]).toMatchObject({ status: "succeeded", copied_from: run.id });
    const done = await ended(wf.id, res.body.data.id);
    expect(done.status).toBe("succeeded");
    // fetch was not called again: its output is the old run's, copied; charge ran once with the new input.
    expect(target.hits).toBe(3);
    expect(done.steps[0]).toEqual({ ...failed.steps[0], copied_from: run.id });
    expect(done.steps[1].copied_from).toBeUndefined();
    expect(done.steps[1].output.body.got).toEqual({ n: 1, order: "o-2" });

    // Without from_step and input: from the start, with the old input.
    const whole = await call("POST", `/workflows/${wf.id}/runs/${run.id}/rerun`);
    expect(whole.body.data).toMatchObject({ input: { order: "o-1" } });
    expect((await ended(wf.id, whole.body.data.id)).steps.map((s: any) => s.copied_from)).toEqual([undefined, undefined]);
  });

  it("refuses a step the workflow lacks, one whose earlier steps did not succeed, and a bad input", async () => {
    target.status = () => 500;
    const wf = (
      await call("POST", "/workflows", {
        name: "rerun-from-bad",
        trigger: { type: "manual" },
        steps: [
          { id: "a", type: "http", method: "POST", url: target.url, retries: 0 },
          { id: "b", type: "set", output: { x: 1 } },
        ],
      })
    ).body.data;
    const run = (await call("POST", `/workflows/${wf.id}/runs`, {})).body.data;
    await ended(wf.id, run.id);
    const rerun = `/workflows/${wf.id}/runs/${run.id}/rerun`;
    expectError(await call("POST", rerun, { from_step: "nope" }), 409, "invalid_state", "from_step");
    expectError(await call("POST", rerun, { from_step: "b" }), 409, "invalid_state", "from_step");
    expectError(await call("POST", rerun, { from_step: 3 }), 400, "parameter_invalid", "from_step");
    expectError(await call("POST", rerun, { input: "x" }), 400, "parameter_invalid", "input");
    expectError(await call("POST", rerun, { from_step: "a" }, suite.globex.live), 404, "resource_not_found");
  });
});
