import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/context";
import { ApiError, notFound } from "../../shared/errors";
import { newId, nowIso } from "../../shared/ids";
import { newestFirst, type ListResult } from "../../shared/pagination";
import { checkCountQuota, QUOTAS } from "../../shared/quotas";
import type { PlatformSettings } from "../../shared/platform";
import { StoreMixin } from "../../shared/store-mixin";
import type { Filter, Tenant } from "../../shared/storage/types";
import { RunsMixin, type RunsMethods, type RunsVars } from "./runs.service";
import { TriggersMixin } from "./triggers.service";
import { STORE } from "./workflows.store";
import { checkSteps, checkTrigger, workflowView, type Step, type WorkflowDoc, type WorkflowView } from "./workflows.logic";
import {
  createParams,
  idParams,
  listParams,
  updateParams,
  type CreateParams,
  type IdParams,
  type ListParams,
  type UpdateParams,
} from "./workflows.params";

interface WorkflowsMethods extends RunsMethods {
  checkedSteps(steps: unknown, tenant: Required<Tenant>): Promise<Step[]>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * Workflow definitions: a trigger and typed steps, versioned on every change. Their runs (the runs
 * API and the engine) and the event trigger are mixins of this service (runs.service.ts,
 * triggers.service.ts), so every action keeps its `workflows.` name. Mixins' lifecycle hooks run
 * from the last listed to the first (stopped: the other way): the store is acquired before the runs
 * mixin's `created` and released after it has stopped the engine.
 */
const WorkflowsService: ServiceSchema<PlatformSettings, WorkflowsMethods, RunsVars> = {
  name: "workflows",
  mixins: [TriggersMixin as Partial<ServiceSchema>, RunsMixin as Partial<ServiceSchema>, StoreMixin(STORE)],

  actions: {
    /** POST /workflows — workflows:write */
    create: {
      params: createParams,
      async handler(ctx: Ctx<CreateParams>): Promise<WorkflowView> {
        const tenant = tenantOf(ctx);
        const trigger = checkTrigger(ctx.params.trigger);
        const steps = await this.checkedSteps(ctx.params.steps, tenant);
        const limit = QUOTAS.workflows_per_environment;
        await checkCountQuota(this.workflows, tenant, {}, "workflows_per_environment", limit, "workflows per environment");
        const at = nowIso();
        const doc: WorkflowDoc = {
          id: newId("wf"),
          ...tenant,
          name: ctx.params.name,
          description: ctx.params.description ?? null,
          status: ctx.params.status ?? "active",
          trigger,
          steps,
          version: 1,
          created_at: at,
          updated_at: at,
        };
        await this.workflows.insert(doc);
        return workflowView(doc);
      },
    },

    /** GET /workflows — workflows:read; newest first, optionally by status or triggering event type. */
    list: {
      params: listParams,
      async handler(ctx: Ctx<ListParams>): Promise<ListResult<WorkflowView>> {
        const filter: Filter = {
          ...(ctx.params.status && { status: ctx.params.status }),
          ...(ctx.params.trigger_event_type && { "trigger.event_type": ctx.params.trigger_event_type }),
        };
        return newestFirst(this.workflows, tenantOf(ctx), filter, ctx.params, workflowView);
      },
    },

    /** GET /workflows/{id} — workflows:read */
    get: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WorkflowView> {
        const doc = await this.workflows.get(tenantOf(ctx), ctx.params.id);
        if (!doc) throw notFound("workflow", ctx.params.id);
        return workflowView(doc);
      },
    },

    /**
     * PATCH /workflows/{id} — workflows:write; `version` goes up by one. The write is a
     * compare-and-set on the version read, so two concurrent updates cannot both land on it.
     */
    update: {
      params: updateParams,
      async handler(ctx: Ctx<UpdateParams>): Promise<WorkflowView> {
        const tenant = tenantOf(ctx);
        const current = await this.workflows.get(tenant, ctx.params.id);
        if (!current) throw notFound("workflow", ctx.params.id);
        const { name, description, status, trigger, steps } = ctx.params;
        const set: Partial<WorkflowDoc> = { version: current.version + 1, updated_at: nowIso() };
        if (name !== undefined) set.name = name;
        if (description !== undefined) set.description = description;
        if (status !== undefined) set.status = status;
        if (trigger !== undefined) set.trigger = checkTrigger(trigger);
        if (steps !== undefined) set.steps = await this.checkedSteps(steps, tenant);
        const updated = await this.workflows.update(tenant, { id: current.id, version: current.version }, { $set: set });
        if (!updated) throw new ApiError("invalid_state", "The workflow changed meanwhile; read it again and retry", { param: "id" });
        return workflowView(updated);
      },
    },

    /** DELETE /workflows/{id} — workflows:write */
    remove: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WorkflowView> {
        const removed = await this.workflows.delete(tenantOf(ctx), { id: ctx.params.id });
        if (!removed) throw notFound("workflow", ctx.params.id);
        return workflowView(removed);
      },
    },
  },

  methods: {
    checkedSteps(steps, tenant) {
      return checkSteps(steps, { allowPrivate: this.settings.config.webhookAllowPrivateTargets, environment: tenant.environment });
    },
  },
};

export default WorkflowsService;
