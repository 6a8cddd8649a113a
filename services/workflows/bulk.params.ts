import { idParam, pageParams, type PageParams } from "../../shared/api/pagination";
import { BULK_ACTIONS, RUN_STATUSES, type BulkAction, type BulkJobFilter } from "../../shared/api/wire";

const instant = { type: "string", min: 1, max: 64, optional: true } as const;

/** POST /runs/bulk: the action and the filter (checked further in bulk.logic.ts `checkFilter`). */
export const startBulkParams = {
  $$strict: true,
  action: { type: "enum", values: [...BULK_ACTIONS] },
  filter: {
    type: "object",
    strict: true,
    props: {
      workflow_id: { ...idParam, optional: true },
      status: { type: "enum", values: [...RUN_STATUSES], optional: true },
      created_after: instant,
      created_before: instant,
      failed_step: { type: "string", min: 1, max: 64, optional: true },
    },
  },
} as const;
export interface StartBulkParams {
  action: BulkAction;
  filter: BulkJobFilter;
}

export const bulkJobParams = { $$strict: true, job_id: idParam } as const;
export interface BulkJobParams {
  job_id: string;
}

export const listBulkParams = { $$strict: true, ...pageParams } as const;
export type ListBulkParams = PageParams;
