import type { Context, ServiceSchema } from "moleculer";
import { actorOf, tenantOf, type CallMeta } from "../../shared/api/context";
import { ApiError, notFound } from "../../shared/errors";
import { newId, nowIso } from "../../shared/ids";
import { newestFirst, type ListResult } from "../../shared/api/pagination";
import { QUOTAS, quotaExceeded, quotaWrite, releaseQuota } from "../../shared/records/quotas";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { StoreMixin } from "../../shared/runtime/store.mixin";
import { generateSecret, ROTATION_OVERLAP_MS } from "../../shared/net/signing";
import type { Filter, Tenant } from "../../shared/storage/types";
import type { WorkflowDefinition, WorkflowWithSecret } from "../../shared/api/wire";
import { RunStartsMixin } from "./run-starts.mixin";
import { RunsMixin, type RunsMethods, type RunsVars } from "./runs.mixin";
import { scheduleOf } from "./schedule-ticks.logic";
import { SchedulesMixin } from "./schedules.mixin";
import { BulkMixin } from "./bulk.mixin";
import { SecretsMixin } from "./secrets.mixin";
import { TriggersMixin } from "./triggers.mixin";
import { checkCancelOn } from "./waits.logic";
import { namedWorkflows } from "./fan-out.check";
import { checkFlow } from "./flow-control.logic";
import { WaitsMixin } from "./waits.mixin";
import { HooksMixin, type HooksMethods } from "./hooks.mixin";
import { HookRequestsMixin } from "./hook-requests.mixin";
import { planHook } from "./hooks.logic";
import { newHookId } from "../../shared/api/hooks";
import { STORE } from "./workflows.store";
import {
  checkOutput,
  checkSteps,
  versionId,
  versionOf,
  versionView,
  VERSIONS_KEPT,
  workflowView,
  type Step,
  type WorkflowDoc,
  type WorkflowView,
} from "./workflows.logic";
import { checkTrigger } from "./trigger-check.logic";
import {
  createParams,
  idParams,
  listParams,
  updateParams,
  type CreateParams,
  type IdParams,
  type ListParams,
  type UpdateParams,
  type VersionParams,
  versionParams,
} from "./workflows.params";

interface WorkflowsMethods extends RunsMethods, HooksMethods {
  checkedSteps(steps: unknown, tenant: Required<Tenant>): Promise<Step[]>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * Workflow definitions: a trigger and typed steps, versioned on every change. Their runs (the runs
 * API and the engine) and the event trigger are mixins of this service (runs.mixin.ts,
 * run-starts.mixin.ts, triggers.mixin.ts), so every action keeps its `workflows.` name. Mixins' lifecycle hooks run
 * from the last listed to the first (stopped: the other way): the store is acquired before the runs
 * mixin's `created` and released after it has stopped the engine.
 */
const WorkflowsService: ServiceSchema<PlatformSettings, WorkflowsMethods, RunsVars> = {
  name: "workflows",
  mixins: [
    BulkMixin as Partial<ServiceSchema>,
    SchedulesMixin as Partial<ServiceSchema>,
    SecretsMixin as Partial<ServiceSchema>,
    WaitsMixin as Partial<ServiceSchema>,
    HooksMixin as Partial<ServiceSchema>,
    HookRequestsMixin as Partial<ServiceSchema>,
    TriggersMixin as Partial<ServiceSchema>,
    RunStartsMixin as Partial<ServiceSchema>,
    RunsMixin as Partial<ServiceSchema>,
    StoreMixin(STORE),
  ],

  actions: {
    /** POST /workflows — workflows:write; the only answer that shows the signing secret, with rotate-secret's. */
    create: {
      params: createParams,
      async handler(ctx: Ctx<CreateParams>): Promise<WorkflowWithSecret> {
        const tenant = tenantOf(ctx);
        const trigger = checkTrigger(ctx.params.trigger);
        const steps = await this.checkedSteps(ctx.params.steps, tenant);
        const cancelOn = checkCancelOn(ctx.params.cancel_on);
        const output = checkOutput(ctx.params.output, steps);
        const flow = checkFlow(ctx.params);
        const quota = {
          counters: this.quota,
          tenant,
          quota: "workflows_per_environment",
          limit: QUOTAS.workflows_per_environment,
          what: "workflows per environment",
          count: () => this.workflows.count(tenant, {}, { limit: QUOTAS.workflows_per_environment + 1 }),
        } as const;
        const taken = await quotaWrite(quota);
        const at = nowIso();
        const { hook, shown } = planHook(trigger, undefined, { hookId: newHookId, secret: generateSecret });
        const doc: WorkflowDoc = {
          id: newId("wf"),
          ...tenant,
          name: ctx.params.name,
          description: ctx.params.description ?? null,
          status: ctx.params.status ?? "active",
          trigger,
          steps,
          timeout_ms: ctx.params.timeout_ms ?? null,
          ...(cancelOn && { cancel_on: cancelOn }),
          ...(output !== undefined && { output }),
          ...flow,
          version: 1,
          created_at: at,
          updated_at: at,
          signing_secret: generateSecret(),
          ...(hook && { hook }),
        };
        const schedule = scheduleOf(trigger, doc.status, this.settings.clock.now());
        if (schedule) doc.schedule = schedule;
        // The workflow, its first version and its count, together: the quota holds whatever the concurrency.
        const stored = await this.store.atomically([
          taken,
          { op: "insert", collection: this.workflows, doc },
          { op: "insert", collection: this.versions, doc: versionOf(doc, actorOf(ctx)) },
        ]);
        if (!stored) throw quotaExceeded(quota.quota, quota.limit, quota.what);
        return { ...workflowView(doc), signing_secret: doc.signing_secret as string, ...(shown && { hook_secret: shown }) };
      },
    },

    /** POST /workflows/validate — workflows:read; the checks of a create, storing nothing: the definition as it would be stored. */
    validate: {
      params: createParams,
      async handler(ctx: Ctx<CreateParams>): Promise<WorkflowDefinition> {
        const trigger = checkTrigger(ctx.params.trigger);
        const steps = await this.checkedSteps(ctx.params.steps, tenantOf(ctx));
        const cancelOn = checkCancelOn(ctx.params.cancel_on);
        const output = checkOutput(ctx.params.output, steps);
        const flow = checkFlow(ctx.params);
        return {
          object: "workflow_definition",
          name: ctx.params.name,
          description: ctx.params.description ?? null,
          status: ctx.params.status ?? "active",
          trigger,
          steps,
          timeout_ms: ctx.params.timeout_ms ?? null,
          ...(cancelOn && { cancel_on: cancelOn }),
          ...(output !== undefined && { output }),
          ...flow,
        };
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
        const unset: Record<string, true> = {};
        let shown: string | undefined;
        if (trigger !== undefined) {
          set.trigger = checkTrigger(trigger);
          const planned = planHook(set.trigger, current.hook, { hookId: newHookId, secret: generateSecret });
          if (planned.hook) set.hook = planned.hook;
          else if (current.hook) unset.hook = true;
          shown = planned.shown;
        }
        if (steps !== undefined) set.steps = await this.checkedSteps(steps, tenant);
        if (ctx.params.timeout_ms !== undefined) set.timeout_ms = ctx.params.timeout_ms;
        if (ctx.params.cancel_on !== undefined) set.cancel_on = checkCancelOn(ctx.params.cancel_on) ?? [];
        // The output is checked against the steps it will run with; null removes it.
        const output =
          ctx.params.output !== undefined || set.steps
            ? checkOutput(ctx.params.output ?? current.output, set.steps ?? current.steps)
            : undefined;
        if (ctx.params.output === null) unset.output = true;
        if (output !== undefined && ctx.params.output !== null) set.output = output;
        // Flow control: null removes it; both are checked as they will be (one key for both).
        if (ctx.params.concurrency !== undefined || ctx.params.throttle !== undefined || ctx.params.debounce !== undefined) {
          const flow = checkFlow({
            concurrency: ctx.params.concurrency === undefined ? current.concurrency : ctx.params.concurrency,
            throttle: ctx.params.throttle === undefined ? current.throttle : ctx.params.throttle,
            debounce: ctx.params.debounce === undefined ? current.debounce : ctx.params.debounce,
          });
          for (const field of ["concurrency", "throttle", "debounce"] as const) {
            if (flow[field]) set[field] = flow[field] as never;
            else if (current[field]) unset[field] = true;
          }
        }
        // A new trigger or status reschedules from now (what the ticks recorded is kept).
        if (trigger !== undefined || status !== undefined) {
          const schedule = scheduleOf(
            set.trigger ?? current.trigger,
            set.status ?? current.status,
            this.settings.clock.now(),
            current.schedule,
          );
          if (schedule) set.schedule = schedule;
          else if (current.schedule) unset.schedule = true;
        }
        // The change and the version it makes, together; the oldest kept version goes once it is past VERSIONS_KEPT.
        const written = await this.store.atomically([
          {
            op: "update",
            collection: this.workflows,
            scope: tenant,
            filter: { id: current.id, version: current.version },
            update: { $set: set, ...(Object.keys(unset).length > 0 && { $unset: unset }) },
          },
          { op: "insert", collection: this.versions, doc: versionOf({ ...current, ...set }, actorOf(ctx)) },
        ]);
        if (!written) throw new ApiError("invalid_state", "The workflow changed meanwhile; read it again and retry", { param: "id" });
        const updated = written[0] as WorkflowDoc;
        if (updated.version > VERSIONS_KEPT)
          await this.versions.delete(tenant, { id: versionId(updated.id, updated.version - VERSIONS_KEPT) });
        if (current.hook) this.hooksChanged([current.hook.id]);
        return { ...workflowView(updated), ...(shown && { hook_secret: shown }) };
      },
    },

    /**
     * DELETE /workflows/{id} — workflows:write. Its versions go with it, its `workflow.deleted` says
     * by whom, and its runs that have not ended are cancelled (queued, running or waiting for
     * approval: none can be approved any more), each with its workflow.completed (`cancelled`,
     * `cancel_reason: workflow_deleted`). Runs that ended stay readable until retention.
     */
    remove: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WorkflowView> {
        const tenant = tenantOf(ctx);
        const by = actorOf(ctx);
        const removed = await this.workflows.delete(tenant, { id: ctx.params.id });
        if (!removed) throw notFound("workflow", ctx.params.id);
        if (removed.hook) this.hooksChanged([removed.hook.id]);
        await releaseQuota({ counters: this.quota, tenant, quota: "workflows_per_environment" });
        // After the deletion, so the event never tells of one that did not happen.
        await this.outbox.recordWith([], {
          ...tenant,
          type: "workflow.deleted",
          data: { workflow_id: removed.id, name: removed.name, deleted_at: nowIso(), deleted_by: by },
          source: "workflows",
        });
        await this.versions.deleteMany(tenant, { workflow_id: removed.id });
        await this.hookRequests.deleteMany(tenant, { workflow_id: removed.id });
        await this.cancelRunsOf(tenant, removed.id, by);
        return workflowView(removed);
      },
    },

    /** GET /workflows/{id}/versions/{version} — workflows:read; the newest VERSIONS_KEPT versions of a workflow that exists. */
    getVersion: {
      params: versionParams,
      async handler(ctx: Ctx<VersionParams>) {
        const doc = await this.versions.get(tenantOf(ctx), versionId(ctx.params.id, ctx.params.version));
        if (!doc)
          throw new ApiError("resource_not_found", `No such version of workflow '${ctx.params.id}': ${ctx.params.version}`, {
            param: "version",
          });
        return versionView(doc);
      },
    },

    /**
     * POST /workflows/{id}/rotate-secret — workflows:write; the old secret keeps signing steps for
     * 24 h beside the new one (as a webhook's does), and a second rotation retires it at once. The
     * definition is unchanged: `version` stays.
     */
    rotateSecret: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<WorkflowWithSecret> {
        const tenant = tenantOf(ctx);
        const current = await this.workflows.get(tenant, ctx.params.id);
        if (!current) throw notFound("workflow", ctx.params.id);
        const now = Date.now();
        const secret = generateSecret();
        const previous = current.signing_secret && {
          previous_signing_secret: { secret: current.signing_secret, expires_at: new Date(now + ROTATION_OVERLAP_MS).toISOString() },
        };
        const updated = await this.workflows.update(
          tenant,
          { id: current.id, signing_secret: current.signing_secret ?? { $exists: false } },
          { $set: { signing_secret: secret, ...previous, updated_at: nowIso() } },
        );
        if (!updated) throw new ApiError("invalid_state", "The secret was rotated meanwhile; retry", { param: "id" });
        return { ...workflowView(updated), signing_secret: secret };
      },
    },
  },

  methods: {
    async checkedSteps(steps, tenant) {
      const checked = await checkSteps(steps, {
        allowPrivate: this.settings.config.webhookAllowPrivateTargets,
        environment: tenant.environment,
      });
      // A run_workflow or map step naming a workflow by its id, at any level: it must be one of this
      // environment's (another tenant's is as unknown here as one that never was). A template's is
      // checked when the run gets there.
      for (const named of namedWorkflows(checked)) {
        if (!(await this.workflows.get(tenant, named.target)))
          throw new ApiError(
            "parameter_invalid",
            `step '${named.stepId}' (${named.param}): no workflow '${named.target}' in this environment`,
            {
              param: named.param,
            },
          );
      }
      return checked;
    },
  },
};

export default WorkflowsService;
