import { BULK_ACTIONS, BULK_JOB_STATUSES, RUN_STATUSES } from "../wire";
import { environment, idOf, type JsonSchema, nullable, object, objectTag, ref, time } from "./common";

/** Bulk jobs on runs (POST /runs/bulk). */
export const BULK_RESOURCES: Record<string, JsonSchema> = {
  BulkJobFilter: object(
    "BulkJobFilter",
    {
      workflow_id: idOf("wf"),
      status: { type: "string", enum: [...RUN_STATUSES] },
      created_after: time,
      created_before: time,
      failed_step: { type: "string", description: "Failed runs whose failing step has this id" },
    },
    ["workflow_id", "status", "created_after", "created_before", "failed_step"],
  ),
  BulkJob: object(
    "BulkJob",
    {
      object: objectTag("bulk_job"),
      id: idOf("blk"),
      environment,
      action: { type: "string", enum: [...BULK_ACTIONS] },
      filter: ref("BulkJobFilter"),
      status: { type: "string", enum: [...BULK_JOB_STATUSES] },
      total: { type: "integer", minimum: 0, description: "Runs in the filter's index range when the job started (up to 10,000)" },
      total_capped: { const: true },
      matched: { type: "integer", minimum: 0, description: "Runs found so far that the action applies to" },
      done: { type: "integer", minimum: 0, description: "Runs acted on" },
      failed: { type: "integer", minimum: 0, description: "Runs whose action was refused; last_error says why" },
      last_error: { type: ["string", "null"] },
      created_by: ref("Actor"),
      created_at: time,
      updated_at: time,
      finished_at: nullable(time),
    },
    ["total_capped"],
    "A background job retrying, rerunning or cancelling the runs a filter picks, a batch at a time",
  ),
};
