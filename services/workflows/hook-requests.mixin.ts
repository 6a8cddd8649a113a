import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { newestFirst, type ListResult } from "../../shared/api/pagination";
import type { HookRequest } from "../../shared/api/wire";
import { notFound } from "../../shared/errors";
import type { PlatformSettings } from "../../shared/runtime/platform";
import type { Tenant } from "../../shared/storage/types";
import { HOOK_REQUESTS_KEPT, hookRequestView, type HookRequestDoc } from "./hook-requests.logic";
import { listHookRequestsParams, type ListHookRequestsParams } from "./hook-requests.params";
import type { WorkflowsStoreVars } from "./workflows.store";

export interface HookRequestsMethods {
  /** Stores a workflow's requests held since the last flush in one write, then prunes all but its newest HOOK_REQUESTS_KEPT. */
  storeHookRequests(tenant: Required<Tenant>, workflowId: string, records: HookRequestDoc[]): Promise<void>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * A hook's recent requests (docs/inbound-webhooks.md): listed newest first along the index on
 * the workflow, and stored by the hooks mixin's flush (hooks.mixin.ts), a batch per workflow and
 * second. A mixin of the workflows service.
 */
export const HookRequestsMixin: Partial<ServiceSchema<PlatformSettings, HookRequestsMethods, WorkflowsStoreVars>> = {
  actions: {
    /** GET /workflows/{id}/hook/requests — workflows:read; newest first, the newest HOOK_REQUESTS_KEPT of the workflow. */
    listHookRequests: {
      params: listHookRequestsParams,
      async handler(ctx: Ctx<ListHookRequestsParams>): Promise<ListResult<HookRequest>> {
        const tenant = tenantOf(ctx);
        const workflow = await this.workflows.get(tenant, ctx.params.id);
        if (!workflow) throw notFound("workflow", ctx.params.id);
        return newestFirst(this.hookRequests, tenant, { workflow_id: workflow.id }, ctx.params, hookRequestView);
      },
    },
  },

  methods: {
    async storeHookRequests(tenant: Required<Tenant>, workflowId: string, records: HookRequestDoc[]) {
      if (records.length === 0) return;
      await this.store.atomically(records.map((doc) => ({ op: "insert" as const, collection: this.hookRequests, doc })));
      // The newest one past those kept: it and every older one go (a read of HOOK_REQUESTS_KEPT + 1 index entries).
      const [oldest] = await this.hookRequests.pluck(tenant, { workflow_id: workflowId }, ["id"], {
        sort: { id: -1 },
        skip: HOOK_REQUESTS_KEPT,
        limit: 1,
      });
      if (oldest) await this.hookRequests.deleteMany(tenant, { workflow_id: workflowId, id: { $lte: oldest.id } });
    },
  },
};
