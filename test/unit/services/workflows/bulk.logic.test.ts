import fc from "fast-check";
import { batchFilter, bulkView, checkFilter, pastEnd, picks, rangeOf, type BulkJobDoc } from "../../../../services/workflows/bulk.logic";
import { idFloorAt } from "../../../../shared/ids";
import { RUN_STATUSES, type BulkAction, type RunStatus } from "../../../../shared/api/wire";

const WF = "wf_01jdx3kq9v7c2m5n8p4r6t0w1y";
const failedAt = (id: string) => ({
  status: "failed" as RunStatus,
  steps: [
    { id: "a", status: "succeeded" },
    { id, status: "failed" },
  ] as never,
});

describe("checkFilter", () => {
  it("needs a workflow or a time range", () => {
    expect(() => checkFilter("cancel", {})).toThrow(expect.objectContaining({ data: { param: "filter" } }));
    expect(() => checkFilter("cancel", { status: "queued" })).toThrow(/workflow_id or a creation time range/);
    expect(checkFilter("cancel", { workflow_id: WF })).toEqual({ workflow_id: WF });
    expect(checkFilter("rerun", { created_before: "2026-01-01T00:00:00+01:00" })).toEqual({ created_before: "2025-12-31T23:00:00.000Z" });
  });

  it("refuses a workflow_id that is not a workflow's id, naming it", () => {
    for (const bad of ["'\\ud800'", "wf_", "run_01m8djyn68x3aknqvfzmc9twnw", `${WF} `, "😀"])
      expect(() => checkFilter("cancel", { workflow_id: bad })).toThrow(
        expect.objectContaining({ type: "parameter_invalid", data: { param: "filter.workflow_id" } }),
      );
  });

  it("accepts exactly the statuses each action applies to", () => {
    const applies: Record<BulkAction, RunStatus[]> = {
      retry: ["failed"],
      rerun: ["succeeded", "failed", "cancelled"],
      cancel: ["queued", "running", "waiting"],
    };
    fc.assert(
      fc.property(fc.constantFrom<BulkAction>("retry", "rerun", "cancel"), fc.constantFrom(...RUN_STATUSES), (action, status) => {
        const ok = applies[action].includes(status);
        if (ok) expect(checkFilter(action, { workflow_id: WF, status }).status).toBe(status);
        else
          expect(() => checkFilter(action, { workflow_id: WF, status })).toThrow(
            expect.objectContaining({ data: { param: "filter.status" } }),
          );
      }),
    );
  });

  it("refuses failed_step with cancel or another status, and a range that ends before it starts", () => {
    expect(() => checkFilter("cancel", { workflow_id: WF, failed_step: "a" })).toThrow(/failed_step/);
    expect(() => checkFilter("rerun", { workflow_id: WF, status: "succeeded", failed_step: "a" })).toThrow(/failed_step/);
    expect(() => checkFilter("rerun", { created_after: "2026-02-01T00:00:00Z", created_before: "2026-02-01T00:00:00Z" })).toThrow(
      expect.objectContaining({ data: { param: "filter.created_before" } }),
    );
    expect(() => checkFilter("rerun", { created_after: "soon" })).toThrow(
      expect.objectContaining({ data: { param: "filter.created_after" } }),
    );
  });
});

describe("a job's walk", () => {
  const job = (action: BulkAction, filter = {}) => ({ action, filter: { workflow_id: WF, ...filter }, ...rangeOf({}, 5000) });

  it("reads along (workflow, status, id) from its cursor to runs made before the job", () => {
    expect(rangeOf({ created_after: "1970-01-01T00:00:01.000Z", created_before: "1970-01-01T00:00:09.000Z" }, 5000)).toEqual({
      cursor: idFloorAt("run", 1000),
      end: idFloorAt("run", 5001),
    });
    expect(batchFilter(job("cancel"))).toEqual({ workflow_id: WF, id: { $gte: idFloorAt("run", 0), $lt: idFloorAt("run", 5001) } });
    expect(batchFilter({ ...job("retry"), started: true, cursor: "run_x" })).toMatchObject({ status: "failed", id: { $gt: "run_x" } });
    expect(batchFilter(job("rerun", { failed_step: "b" }))).toMatchObject({ status: "failed" });
    // A batch's read leaves the end out (the index with the status is then SQLite's choice) and stops at it itself.
    expect(batchFilter(job("retry"), false)).toEqual({ workflow_id: WF, status: "failed", id: { $gte: idFloorAt("run", 0) } });
    expect(pastEnd(job("retry"), { id: idFloorAt("run", 5001) })).toBe(true);
    expect(pastEnd(job("retry"), { id: idFloorAt("run", 5000) })).toBe(false);
  });

  it("picks the runs its action applies to, and failed_step the run's failing step", () => {
    expect(picks(job("cancel"), { status: "waiting", steps: [] })).toBe(true);
    expect(picks(job("cancel"), { status: "failed", steps: [] })).toBe(false);
    expect(picks(job("retry", { failed_step: "b" }), failedAt("b"))).toBe(true);
    expect(picks(job("retry", { failed_step: "b" }), failedAt("c"))).toBe(false);
  });

  it("shows no field that drives the job", () => {
    const doc = {
      id: "blk_1",
      org_id: "org_1",
      running: "x",
      cursor: "c",
      end: "e",
      due_at: 1,
      lease: "l",
      batch: [],
      batch_end: "b",
    } as unknown as BulkJobDoc;
    expect(bulkView(doc)).toEqual({ object: "bulk_job", id: "blk_1" });
  });
});
