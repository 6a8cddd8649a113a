import { waitFor } from "../../tools/procs";
import { api, usePlatform } from "../helpers/platform";

const suite = usePlatform();

describe("GET /events/types and workflow emit steps", () => {
  it("lists a custom type that only a workflow's emit step has produced, once", async () => {
    const key = suite.acme.test;
    const call = (method: string, path: string, body?: unknown) => api(suite.p.baseUrl, method, path, { key, body });
    const wf = await call("POST", "/workflows", {
      name: "announce",
      trigger: { type: "manual" },
      steps: [{ type: "emit", event_type: "parcel.announced", data: { n: "{{input.n}}" } }],
    });
    expect(wf.status).toBe(201);
    for (const n of [1, 2]) {
      const run = await call("POST", `/workflows/${wf.body.data.id}/runs`, { input: { n } });
      expect(run.status).toBe(201);
      await waitFor(
        "the run to succeed",
        async () => (await call("GET", `/workflows/${wf.body.data.id}/runs/${run.body.data.id}`)).body.data.status === "succeeded",
      );
    }
    const emitted = await call("GET", "/events?type=parcel.announced");
    expect(emitted.body.data).toHaveLength(2);

    const types = (await call("GET", "/events/types?per_page=100")).body.data as { type: string; system: boolean }[];
    expect(types.filter((t) => t.type === "parcel.announced")).toEqual([
      expect.objectContaining({ type: "parcel.announced", system: false }),
    ]);
    // System types are listed as such, never again as custom ones.
    expect(types.filter((t) => t.type === "workflow.completed")).toEqual([expect.objectContaining({ system: true })]);
    // Another environment has not emitted it.
    const live = (await api(suite.p.baseUrl, "GET", "/events/types?per_page=100", { key: suite.acme.live })).body.data;
    expect(live.map((t: { type: string }) => t.type)).not.toContain("parcel.announced");
  });
});
