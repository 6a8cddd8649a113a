import type { Context, ServiceSchema } from "moleculer";
import { actorOf, tenantOf, type CallMeta } from "../../shared/api/context";
import { ApiError, invalidParam, notFound } from "../../shared/errors";
import { runRowsOf, Tally, type RunOutcomeRow } from "../../shared/records/outcomes";
import { traceOf } from "../../shared/runtime/trace";
import { GAUGE_COUNT_CAP, GAUGE_INTERVAL_MS, Metrics } from "../../shared/runtime/metrics";
import { idFloorAt } from "../../shared/ids";
import { instantOf, newestFirst, type ListResult } from "../../shared/api/pagination";
import {
  DAY_MS,
  FINISHED_RUN_STATUSES,
  prune,
  pruneAction,
  Pruner,
  retentionCutoff,
  type PruneControl,
} from "../../shared/records/retention";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { ALL_TENANTS, type Filter, type Tenant } from "../../shared/storage/types";
import { ChildRuns } from "./child-runs";
import { RUN_DUE, RunEngine } from "./engine";
import { FlowGate } from "./flow-gate";
import { heldAgain } from "./flow-control.logic";
import type { RunStartsMethods } from "./run-starts.mixin";
import type { Shares } from "./tenant-slots";
import { approve, cancel, reject, retry, type Decider } from "./run-decisions.logic";
import { rerunFrom } from "./rerun-from.logic";
import { stepChildren } from "./step-children";
import type { RunDoc } from "./run-doc";
import { runView, type RunView } from "./run-view.logic";
import { updateOf, type RunWrite } from "./run-write.logic";
import { newRun } from "./runs.logic";
import type { WorkflowDoc } from "./workflows.logic";
import type { SecretsMethods } from "./secrets.mixin";
import type { WaitsMethods } from "./waits.mixin";
import type { WorkflowsStoreVars } from "./workflows.store";
import {
  decideParams,
  listAllRunsParams,
  listRunsParams,
  rerunParams,
  runParams,
  startRunParams,
  type DecideParams,
  type ListAllRunsParams,
  type ListRunsParams,
  type RerunParams,
  type RunParams,
  type StartRunParams,
} from "./workflows.params";

/**
 * Runs one workflows node drives at once, and how many of them one organization and one of its
 * environments may hold (tenant-slots.ts): whatever one tenant's runs do, 32 slots stay for the
 * other organizations and 16 for the organization's other environment.
 */
export const RUN_SHARES: Shares = { total: 112, perOrg: 80, perEnvironment: 64 };
/** JSON size of a run's input. */
const INPUT_MAX_BYTES = 64 * 1024;

/** The store's collections and outbox (workflows.store.ts), and what the runs keep. */
export interface RunsVars extends WorkflowsStoreVars {
  engine: RunEngine;
  flowGate: FlowGate;
  pruner: Pruner;
  /** Runs that ended, counted per workflow, hour and day (see shared/records/outcomes.ts). */
  tally: Tally<RunOutcomeRow>;
  metrics: Metrics;
  gauges: NodeJS.Timeout | undefined;
}
export interface RunsMethods extends SecretsMethods, RunStartsMethods, WaitsMethods {
  ownRun(tenant: Required<Tenant>, params: RunParams): Promise<RunDoc>;
  /** Cancel, approve or reject: a compare-and-set on the run's revision, re-read while the engine moves it. */
  decide(tenant: Required<Tenant>, params: RunParams, transition: (run: RunDoc, now: number) => RunWrite): Promise<RunView>;
  /** The workflow `id`, which must exist (404). */
  ownWorkflow(tenant: Required<Tenant>, id: string): Promise<WorkflowDoc>;
  /** Cancels every run of a deleted workflow that has not ended, by `by`; answers how many. */
  cancelRunsOf(tenant: Required<Tenant>, workflowId: string, by: Decider["by"]): Promise<number>;
  /** Deletes the runs that finished more than EVENT_RETENTION_DAYS before `now`. */
  pruneRuns(now: number, control: PruneControl): Promise<number>;
  /** Runs by status now and runs waiting for an approval: bounded counts through the `{status, due_at}` index. */
  measureRuns(): Promise<void>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * The cancel, approve and reject actions: each a `decide` with its transition (run-decisions.logic.ts), by
 * the calling key, with the comment sent. Approve and reject need the workflow still there.
 */
function decision(transition: (run: RunDoc, now: number, d: Decider) => RunWrite, needsWorkflow: boolean) {
  return {
    params: needsWorkflow ? decideParams : runParams,
    async handler(this: RunsMethods, ctx: Ctx<DecideParams>): Promise<RunView> {
      const tenant = tenantOf(ctx);
      if (needsWorkflow) await this.ownWorkflow(tenant, ctx.params.id);
      const d: Decider = { by: actorOf(ctx), comment: ctx.params.comment || null };
      return this.decide(tenant, ctx.params, (run, now) => transition(run, now, d));
    },
  };
}

/**
 * The runs of workflows: their API and the engine that drives them. A mixin of the workflows service
 * (its actions keep the `workflows.` names the gateway's route table calls); the store must be
 * acquired before this mixin's `created` and released after its `stopped` (see workflows.service.ts).
 */
export const RunsMixin: Partial<ServiceSchema<PlatformSettings, RunsMethods, RunsVars>> = {
  actions: {
    /** POST /workflows/{id}/runs — workflows:write; an active workflow only. */
    startRun: {
      params: startRunParams,
      async handler(ctx: Ctx<StartRunParams>): Promise<RunView> {
        const tenant = tenantOf(ctx);
        const workflow = await this.ownWorkflow(tenant, ctx.params.id);
        if (workflow.status !== "active")
          throw new ApiError("invalid_state", "The workflow is inactive; activate it (PATCH status: active) to run it", { param: "id" });
        const input = ctx.params.input ?? {};
        if (Buffer.byteLength(JSON.stringify(input)) > INPUT_MAX_BYTES)
          throw new ApiError("parameter_invalid", `input is over ${INPUT_MAX_BYTES} bytes as JSON`, { param: "input" });
        return this.startApiRun(tenant, { ...newRun(workflow, input, { type: "manual" }, Date.now()), ...traceOf(ctx.meta) });
      },
    },

    /**
     * POST /workflows/{id}/runs/{run_id}/rerun — workflows:write. A new run of the workflow as it is
     * now (its current version, like Inngest's replay) with the old run's input or a new one, from
     * its first step or from `from_step` (rerun-from.logic.ts), `rerun_of` the old run; the old run
     * must have ended and the workflow be active. Counted as a start.
     */
    rerunRun: {
      params: rerunParams,
      async handler(ctx: Ctx<RerunParams>): Promise<RunView> {
        const tenant = tenantOf(ctx);
        const workflow = await this.ownWorkflow(tenant, ctx.params.id);
        const old = await this.ownRun(tenant, ctx.params);
        if (workflow.status !== "active")
          throw new ApiError("invalid_state", "The workflow is inactive; activate it (PATCH status: active) to run it", { param: "id" });
        const { input, from_step } = ctx.params;
        if (input !== undefined && Buffer.byteLength(JSON.stringify(input)) > INPUT_MAX_BYTES)
          throw new ApiError("parameter_invalid", `input is over ${INPUT_MAX_BYTES} bytes as JSON`, { param: "input" });
        return this.startApiRun(tenant, rerunFrom(workflow, old, Date.now(), { fromStep: from_step, input }));
      },
    },

    /**
     * POST /workflows/{id}/runs/{run_id}/retry — workflows:write. A failed run goes on from its
     * failed step: the same run, `attempt` one more, its own (pinned) definition; not a rejected one.
     */
    retryRun: {
      params: runParams,
      async handler(ctx: Ctx<RunParams>): Promise<RunView> {
        const tenant = tenantOf(ctx);
        await this.ownWorkflow(tenant, ctx.params.id);
        // Under flow control, it goes back to the end of its key's line (flow-control.logic.ts).
        const view = await this.decide(tenant, ctx.params, (run, now) => heldAgain(run, retry(run, now), now));
        const stored = await this.runs.get(tenant, view.id);
        if (stored?.held_at === undefined || !stored.flow_key) return view;
        await this.flowGate.pump(tenant, stored.flow_key);
        return runView((await this.runs.get(tenant, view.id)) ?? stored);
      },
    },

    /**
     * GET /runs — workflows:read; every workflow's runs, newest first, by status, workflow, parent run
     * and creation time; a parent run's step's children (`step_id`) in item order.
     */
    listAllRuns: {
      params: listAllRunsParams,
      handler(ctx: Ctx<ListAllRunsParams>): Promise<ListResult<RunView>> {
        const { status, workflow_id, parent_run_id, step_id, created_after, created_before } = ctx.params;
        if (step_id !== undefined && parent_run_id === undefined)
          throw invalidParam("step_id", "step_id lists one step's child runs: send it with parent_run_id, the run whose step it is");
        // A creation time range is a range of ids (they are time-ordered): it reads along the id index.
        const range = {
          ...(created_after !== undefined && { $gte: idFloorAt("run", instantOf("created_after", created_after)) }),
          ...(created_before !== undefined && { $lt: idFloorAt("run", instantOf("created_before", created_before)) }),
        };
        const filter: Filter = {
          ...(workflow_id && { workflow_id }),
          ...(parent_run_id && { "parent.run_id": parent_run_id }),
          ...(status && { status }),
          ...(Object.keys(range).length > 0 && { id: range }),
        };
        if (parent_run_id !== undefined && step_id !== undefined)
          return stepChildren(
            this.runs,
            tenantOf(ctx),
            { ...filter, "parent.run_id": parent_run_id, "parent.step_id": step_id },
            ctx.params,
          );
        return newestFirst(this.runs, tenantOf(ctx), filter, ctx.params, runView);
      },
    },

    /** GET /workflows/{id}/runs — workflows:read; newest first. */
    listRuns: {
      params: listRunsParams,
      async handler(ctx: Ctx<ListRunsParams>): Promise<ListResult<RunView>> {
        const tenant = tenantOf(ctx);
        const workflow = await this.workflows.get(tenant, ctx.params.id);
        // Runs outlive their workflow: list them while any exist.
        const filter: Filter = { workflow_id: ctx.params.id, ...(ctx.params.status && { status: ctx.params.status }) };
        const page = await newestFirst(this.runs, tenant, filter, ctx.params, runView);
        if (!workflow && page.total === 0) throw notFound("workflow", ctx.params.id);
        return page;
      },
    },

    /** GET /workflows/{id}/runs/{run_id} — workflows:read */
    getRun: {
      params: runParams,
      async handler(ctx: Ctx<RunParams>): Promise<RunView> {
        return runView(await this.ownRun(tenantOf(ctx), ctx.params));
      },
    },

    /** POST /workflows/{id}/runs/{run_id}/cancel — workflows:write; a run that has ended is a conflict. */
    cancelRun: decision(cancel, false),
    /** POST /workflows/{id}/runs/{run_id}/approve — workflows:write; only while it waits for approval. */
    approveRun: decision(approve, true),
    /** POST /workflows/{id}/runs/{run_id}/reject — workflows:write; the run ends `failed`. */
    rejectRun: decision(reject, true),

    /** Internal (operators, tests): a retention pass now, or as of `now`. */
    prune: pruneAction,
  },

  events: {
    [RUN_DUE]: {
      handler(ctx: Context<{ id: string; org_id?: string; environment?: Tenant["environment"] }>) {
        const { id, org_id, environment } = ctx.params;
        this.engine.wake(id, org_id && environment ? { org_id, environment } : undefined);
      },
    },
  },

  methods: {
    async measureRuns() {
      const count = (filter: Filter) => this.runs.count(ALL_TENANTS, filter, { limit: GAUGE_COUNT_CAP });
      const [queued, running, waiting, approval] = await Promise.all([
        count({ status: "queued" }),
        count({ status: "running" }),
        count({ status: "waiting" }),
        // Waiting for a person: a wait the engine has no due time for, with an approval asked (a
        // parent waiting for its child run has no due time either).
        count({ status: "waiting", due_at: null, "pending_approval.step_id": { $exists: true } }),
      ]);
      for (const [status, n] of Object.entries({ queued, running, waiting })) this.metrics.set("runs", n, { status });
      this.metrics.set("runsAwaitingApproval", approval);
    },

    async ownWorkflow(tenant, id) {
      const workflow = await this.workflows.get(tenant, id);
      if (!workflow) throw notFound("workflow", id);
      return workflow;
    },

    async cancelRunsOf(tenant, workflowId, by) {
      let cancelled = 0;
      // In batches along the (workflow_id, status, id) index; each a compare-and-set like POST …/cancel.
      for (;;) {
        const batch = await this.runs.find(
          tenant,
          { workflow_id: workflowId, status: { $in: ["queued", "running", "waiting"] } },
          { sort: { id: -1 }, limit: 100 },
        );
        let progress = false;
        for (const run of batch) {
          try {
            await this.decide(tenant, { id: workflowId, run_id: run.id }, (r, now) => cancel(r, now, { by }, "workflow_deleted"));
            cancelled += 1;
            progress = true;
          } catch (err) {
            // It ended meanwhile (nothing to cancel), or kept changing (the engine's node answers for it).
            if (!(err instanceof ApiError && err.type === "invalid_state")) throw err;
          }
        }
        // A batch of runs none of which could be cancelled would come back as it is: stop there.
        if (!progress) return cancelled;
      }
    },

    async ownRun(tenant, { id, run_id }) {
      const run = await this.runs.findOne(tenant, { id: run_id, workflow_id: id });
      if (!run) throw new ApiError("resource_not_found", `No such run: '${run_id}'`, { param: "run_id" });
      return run;
    },

    async decide(tenant, params, transition) {
      for (let tries = 0; ; tries += 1) {
        const run = await this.ownRun(tenant, params);
        const updated = await this.runs.update(tenant, { id: run.id, rev: run.rev }, updateOf(transition(run, Date.now())));
        if (updated) {
          this.broker.emit(RUN_DUE, { id: run.id, ...tenant }).catch(() => undefined);
          return runView(updated);
        }
        if (tries >= 20) throw new ApiError("invalid_state", "The run kept changing; retry", { param: "run_id" });
      }
    },

    async pruneRuns(now, control) {
      const days = this.settings.config.eventRetentionDays;
      // By when they ended, through the sparse `finished_at` index; a run that has not ended stays.
      const before = new Date(retentionCutoff(days, now)).toISOString();
      const runs = await prune(
        { collection: this.runs, field: "finished_at", before, removable: { status: { $in: [...FINISHED_RUN_STATUSES] } } },
        control,
      );
      // Budgets past their time go too (not counted: the answer is runs).
      await prune({ collection: this.budgets, field: "expires_at", before: new Date(now).toISOString(), removable: {} }, control);
      await prune({ collection: this.waits, field: "until", before: new Date(now).toISOString(), removable: {} }, control);
      await prune({ collection: this.shapes, field: "until", before: new Date(now).toISOString(), removable: {} }, control);
      // Bulk jobs that ended, kept as long as the runs they acted on (bulk.mixin.ts).
      await prune(
        { collection: this.bulkJobs, field: "finished_at", before, removable: { status: { $in: ["succeeded", "cancelled"] } } },
        control,
      );
      return runs;
    },
  },

  created() {
    this.metrics = new Metrics(this.broker, ["runsFinished", "runs", "runsAwaitingApproval"]);
    const settings = this.settings.config;
    this.tally = new Tally(this.outcomes, (message, err) => this.logger.warn(message, err), settings.usageRetentionDays * DAY_MS);
    this.engine = new RunEngine({
      runs: this.runs,
      workflows: this.workflows,
      secretValues: (tenant, names) => this.secretValues(tenant, names),
      register: (run, registrations) => this.registerWaits(run, registrations),
      broker: this.broker,
      logger: this.logger,
      allowPrivate: settings.webhookAllowPrivateTargets,
      retryBaseMs: settings.workflowRetryBaseMs,
      maxActive: RUN_SHARES.total,
      shares: RUN_SHARES,
      children: new ChildRuns({
        runs: this.runs,
        workflows: this.workflows,
        startsBudget: (tenant, now) => this.startsBudget(tenant, now),
        now: () => this.settings.clock.now(),
        startCounted: (tenant, budgets, run) => this.startCounted(tenant, budgets, run),
        descendantsMax: settings.runDescendantsMax,
        budgetTtlMs: settings.eventRetentionDays * DAY_MS,
        wake: (id, tenant) => this.engine.wake(id, tenant),
      }),
      ended: ({ org_id, environment, data, created_at }, run) => {
        this.forgetWaits(run);
        // Its key has room now: the oldest run held behind it goes.
        if (run.flow_key) void this.flowGate.pump({ org_id, environment: run.environment }, run.flow_key);
        this.tally.add(runRowsOf({ org_id, environment, workflow_id: String(data.workflow_id) }, created_at), { [String(data.status)]: 1 });
        this.metrics.increment("runsFinished", { status: String(data.status) });
      },
    });
    this.flowGate = new FlowGate({
      runs: this.runs,
      budgets: this.budgets,
      atomically: (writes) => this.store.atomically(writes),
      startsBudget: (tenant, now) => this.startsBudget(tenant, now),
      clock: () => this.settings.clock.now(),
      due: (run) => void this.broker.emit(RUN_DUE, { id: run.id, org_id: run.org_id, environment: run.environment }).catch(() => undefined),
      logger: this.logger,
    });
    this.pruner = new Pruner("finished runs", (now, control) => this.pruneRuns(now, control), this.logger);
  },

  started() {
    this.engine.start();
    this.flowGate.start();
    this.pruner.start();
    if (this.metrics.enabled) {
      const measure = () => void this.measureRuns().catch((err: unknown) => this.logger.debug("measuring runs failed", err));
      this.gauges = setInterval(measure, GAUGE_INTERVAL_MS);
      this.gauges.unref();
      measure();
    }
  },

  /** Finishes the steps in flight and hands their runs back for any node to go on. */
  async stopped() {
    clearInterval(this.gauges);
    this.flowGate.stop();
    await Promise.all([this.engine.stop(), this.pruner.stop()]);
    await this.tally.flush();
  },
};
