import { platformClient } from "../../clients/typescript/index";
import { waitFor } from "../../tools/procs";
import { contractProblems } from "../helpers/contract";
import { usePlatform } from "../helpers/platform";

const suite = usePlatform();

describe("the generated TypeScript client (clients/typescript) against a running server", () => {
  it("creates a workflow, starts a run and reads it, every answer as the document says", async () => {
    const api = platformClient(suite.p.baseUrl, suite.acme.test);
    const created = await api.POST("/workflows", {
      body: { name: "Ship orders", trigger: { type: "manual" }, steps: [{ type: "emit", event_type: "order.shipped", data: { n: 1 } }] },
    });
    expect(created.response.status).toBe(201);
    const wf = created.data!.data;
    expect(wf).toMatchObject({ name: "Ship orders", status: "active", trigger: { type: "manual" }, version: 1 });
    expect(wf.steps).toEqual([{ id: "step_1", type: "emit", event_type: "order.shipped", data: { n: 1 } }]);
    expect(created.response.headers.get("location")).toBe(`/v1/workflows/${wf.id}`);

    const started = await api.POST("/workflows/{id}/runs", { params: { path: { id: wf.id } }, body: { input: { order: "o_1" } } });
    expect(started.response.status).toBe(201);
    const run = started.data!.data;
    expect(run).toMatchObject({ workflow_id: wf.id, workflow_version: 1, input: { order: "o_1" }, trigger: { type: "manual" } });
    expect(started.response.headers.get("location")).toBe(`/v1/workflows/${wf.id}/runs/${run.id}`);

    let status = run.status;
    await waitFor("the run to finish", async () => {
      const read = await api.GET("/workflows/{id}/runs/{run_id}", { params: { path: { id: wf.id, run_id: run.id } } });
      expect(read.response.status).toBe(200);
      expect(
        contractProblems("GET", `/workflows/${wf.id}/runs/${run.id}`, {
          status: 200,
          headers: { "request-id": read.response.headers.get("request-id") },
          body: read.data,
        }),
      ).toEqual([]);
      status = read.data!.data.status;
      return status === "succeeded";
    });
    expect(status).toBe("succeeded");
  });

  it("answers an error in the document's error shape, typed", async () => {
    const api = platformClient(suite.p.baseUrl, suite.acme.test);
    const missing = await api.GET("/workflows/{id}", { params: { path: { id: "wf_01jdx3kq9v7c2m5n8p4r6t0w1y" } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toMatchObject({ error: { code: "resource_not_found", type: "not_found_error" } });
    const refused = await platformClient(suite.p.baseUrl, "svc_test_nope").GET("/workflows", {});
    expect(refused.response.status).toBe(401);
    expect(refused.error?.error.code).toBe("invalid_api_key");
  });
});
