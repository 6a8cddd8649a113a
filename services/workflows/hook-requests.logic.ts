import type { HookRequest, HookRequestOutcome } from "../../shared/api/wire";
import { collectionSpec, type Doc, type Environment } from "../../shared/storage/types";

/**
 * A hook's recent requests (GET /workflows/{id}/hook/requests, docs/inbound-webhooks.md): what
 * became of each, kept in `workflow_hook_requests`, the newest HOOK_REQUESTS_KEPT of a workflow.
 * They are held in memory with the hook's counts and stored with them, about once a second
 * (hooks.mixin.ts); this file holds which requests are kept for that write and their view.
 */

/** Requests kept per workflow; older ones are pruned as newer ones are stored. */
export const HOOK_REQUESTS_KEPT = 100;
/** Refusals one hook stores per flush (about a second): under a flood of forgeries the rest are only counted. */
export const REFUSALS_KEPT_PER_FLUSH = 10;
/** Refusals one node stores per flush across its hooks: a flood spread over many hooks writes no more than this a second. */
export const REFUSALS_KEPT_PER_NODE = 200;

export interface HookRequestDoc extends Doc {
  environment: Environment;
  workflow_id: string;
  hook_id: string;
  outcome: HookRequestOutcome;
  status: HookRequest["status"];
  run_id?: string;
  reason?: string;
  request_id?: string;
  received_at: string;
}

export const HOOK_REQUESTS = collectionSpec<HookRequestDoc>("workflow_hook_requests", [
  // A workflow's requests newest first (the list, and the prune of all but the newest kept).
  { fields: { org_id: 1, environment: 1, workflow_id: 1, id: 1 } },
]);

const STATUS: Record<HookRequestOutcome, HookRequest["status"]> = { accepted: 202, filtered: 200, duplicate: 200, refused: 401 };
export const statusOf = (outcome: HookRequestOutcome): HookRequest["status"] => STATUS[outcome];

/** What one hook's requests came to since the last flush: the records waiting to be stored. */
export interface PendingRequests {
  records: HookRequestDoc[];
  refusals: number;
}

/**
 * Holds a request with `outcome` for the next write, given what its hook (`pending`) and the whole
 * node (`nodeRefusals`) hold already; answers whether it was held. The newest HOOK_REQUESTS_KEPT
 * are held (a workflow keeps no more), refusals only within their caps: the first of each flush
 * are stored, and every one is counted elsewhere. `build` makes the record, only once it is held.
 */
export function holdRequest(
  pending: PendingRequests,
  nodeRefusals: number,
  outcome: HookRequestOutcome,
  build: () => HookRequestDoc,
): boolean {
  if (outcome === "refused") {
    if (pending.refusals >= REFUSALS_KEPT_PER_FLUSH || nodeRefusals >= REFUSALS_KEPT_PER_NODE) return false;
    pending.refusals += 1;
  }
  if (pending.records.length >= HOOK_REQUESTS_KEPT) pending.records.shift();
  pending.records.push(build());
  return true;
}

export function hookRequestView(doc: HookRequestDoc): HookRequest {
  return {
    object: "hook_request",
    id: doc.id,
    workflow_id: doc.workflow_id,
    hook_id: doc.hook_id,
    outcome: doc.outcome,
    status: doc.status,
    run_id: doc.run_id ?? null,
    reason: doc.reason ?? null,
    request_id: doc.request_id ?? null,
    received_at: doc.received_at,
  };
}
