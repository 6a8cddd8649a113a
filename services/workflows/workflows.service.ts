import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/context";
import { ApiError, isDuplicate, notFound, refuseNulls } from "../../shared/errors";
import { EventConsumer } from "../../shared/event-consumer";
import { EVENT_STORED, eventsCollection, recordWith, type EventDoc } from "../../shared/events";
import { newId, nowIso } from "../../shared/ids";
import { runOutcomesCollection, runRowsOf, Tally, type RunOutcomeRow } from "../../shared/outcomes";
import { newestFirst, type ListResult } from "../../shared/pagination";
import { checkCountQuota, QUOTAS } from "../../shared/quotas";
import {
  DAY_MS,
  FINISHED_RUN_STATUSES,
  prune,
  Pruner,
  retentionCutoff,
  RUN_RETENTION_INDEXES,
  RUNS_COLLECTION,
  type PruneControl,
} from "../../shared/retention";
import type { PlatformSettings } from "../../shared/platform";
import { StoreMixin } from "../../shared/store-mixin";
import type { Collection, Doc, Environment, Filter, Store, Tenant } from "../../shared/storage/types";
import { RUN_DUE, RunEngine } from "./engine";
import { finish, MAX_CHAIN_DEPTH, newRun, runView, TERMINAL, type RunDoc, type RunView } from "./runs.logic";
import { checkSteps, checkTrigger, workflowView, type Step, type WorkflowDoc, type WorkflowView } from "./workflows.logic";
import {
  createParams,
  idParams,
  listParams,
  listRunsParams,
  NOT_NULL,
  runParams,
  startRunParams,
  updateParams,
  type CreateParams,
  type IdParams,
  type ListParams,
  type ListRunsParams,
  type RunParams,
  type StartRunParams,
  type UpdateParams,
} from "./workflows.params";

/**
 * A count of runs started against a limit: the budget of one chain of event-started runs (under the
 * id of the event that began it), or the runs started through the API in one minute of one
 * environment (`starts/<org>/<environment>/<minute>`).
 */
interface BudgetDoc extends Doc {
  environment: Environment;
  runs: number;
  /** Pruned after this: EVENT_RETENTION_DAYS after a chain's root event, an hour after a minute. */
  expires_at: string;
  /** When a chain's budget first refused a run (its `workflow.chain_limited` is stored then, once). */
  limited_at?: string;
}

const MINUTE_MS = 60_000;

/** Runs one workflows node drives at once. */
const MAX_ACTIVE_RUNS = 64;
const SWEEP_MS = 500;
/** JSON size of a run's input. */
const INPUT_MAX_BYTES = 64 * 1024;

interface WorkflowsVars {
  store: Store;
  workflows: Collection<WorkflowDoc>;
  runs: Collection<RunDoc>;
  events: Collection<EventDoc>;
  /** Run budgets: of event chains (QUOTAS.runs_per_event_chain) and of API starts per minute. */
  budgets: Collection<BudgetDoc>;
  engine: RunEngine;
  consumer: EventConsumer;
  sweeper: NodeJS.Timeout | undefined;
  pruner: Pruner;
  /** Runs that ended, counted per workflow, hour and day (see shared/outcomes.ts). */
  tally: Tally<RunOutcomeRow>;
}
interface WorkflowsMethods {
  checkedSteps(steps: unknown, tenant: Required<Tenant>): Promise<Step[]>;
  ownRun(tenant: Required<Tenant>, params: RunParams): Promise<RunDoc>;
  /** Cancel, approve or reject: a compare-and-set on the run's revision, re-read while the engine moves it. */
  decide(tenant: Required<Tenant>, params: RunParams, kind: "cancel" | "approve" | "reject"): Promise<RunView>;
  /** Starts the runs one tenant's events trigger; answers the events not done. */
  trigger(tenant: Required<Tenant>, events: EventDoc[]): Promise<Set<string>>;
  /** Creates the budget `id`, unless it exists. */
  openBudget(tenant: Required<Tenant>, id: string, expiresAt: number): Promise<void>;
  /** Stores `run` and counts it against the budget `id`, both or neither; false: the budget is spent. */
  startCounted(tenant: Required<Tenant>, budget: { id: string; limit: number; expiresAt: number }, run: RunDoc): Promise<boolean>;
  /** A run the budget refused: a warning, and once per chain the `workflow.chain_limited` event. */
  chainLimited(tenant: Required<Tenant>, root: string, event: EventDoc, workflowId: string): Promise<void>;
  /** Deletes the runs that finished more than EVENT_RETENTION_DAYS before `now`. */
  pruneRuns(now: number, control: PruneControl): Promise<number>;
}
type Ctx<P> = Context<P, CallMeta>;

/** The cancel, approve and reject actions: each a `decide` of its kind. */
function decision(kind: "cancel" | "approve" | "reject") {
  return {
    params: runParams,
    handler(this: WorkflowsMethods, ctx: Ctx<RunParams>): Promise<RunView> {
      return this.decide(tenantOf(ctx), ctx.params, kind);
    },
  };
}

/** Workflow definitions: a trigger and typed steps, versioned on every change. */
const WorkflowsService: ServiceSchema<PlatformSettings, WorkflowsMethods, WorkflowsVars> = {
  name: "workflows",
  mixins: [StoreMixin],

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
        refuseNulls(ctx.params, NOT_NULL);
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

    /** POST /workflows/{id}/runs — workflows:write; an active workflow only. */
    startRun: {
      params: startRunParams,
      async handler(ctx: Ctx<StartRunParams>): Promise<RunView> {
        const tenant = tenantOf(ctx);
        const workflow = await this.workflows.get(tenant, ctx.params.id);
        if (!workflow) throw notFound("workflow", ctx.params.id);
        if (workflow.status !== "active")
          throw new ApiError("invalid_state", "The workflow is inactive; activate it (PATCH status: active) to run it", { param: "id" });
        const input = ctx.params.input ?? {};
        if (Buffer.byteLength(JSON.stringify(input)) > INPUT_MAX_BYTES)
          throw new ApiError("parameter_invalid", `input is over ${INPUT_MAX_BYTES} bytes as JSON`, { param: "input" });
        const now = Date.now();
        const run = newRun(workflow, input, { type: "manual" }, now);
        // At most RUN_STARTS_PER_MINUTE runs started through the API per minute and environment.
        const minute = now - (now % MINUTE_MS);
        const limit = this.settings.config.runStartsPerMinute;
        const budget = { id: `starts/${tenant.org_id}/${tenant.environment}/${minute}`, limit, expiresAt: minute + 60 * MINUTE_MS };
        if (!(await this.startCounted(tenant, budget, run))) {
          throw new ApiError(
            "rate_limited",
            `Quota runs_started_per_minute reached: at most ${limit} runs may be started per minute in this environment`,
            {
              quota: "runs_started_per_minute",
              limit,
              retry_after: Math.max(1, Math.ceil((minute + MINUTE_MS - Date.now()) / 1000)),
            },
          );
        }
        // A lost wake-up only delays the run until a node's next poll.
        this.broker.emit(RUN_DUE, { id: run.id }).catch(() => undefined);
        return runView(run);
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
    cancelRun: decision("cancel"),
    /** POST /workflows/{id}/runs/{run_id}/approve — workflows:write; only while it waits for approval. */
    approveRun: decision("approve"),
    /** POST /workflows/{id}/runs/{run_id}/reject — workflows:write; the run ends `failed`. */
    rejectRun: decision("reject"),

    /** Internal (operators, tests): one retention pass now, as of `now`; answers how many runs went. */
    prune: {
      visibility: "public",
      params: { $$strict: true, now: { type: "number", integer: true, optional: true } },
      handler(ctx: Context<{ now?: number }>): Promise<number> {
        const now = ctx.params.now;
        return now === undefined ? this.pruner.run() : this.pruneRuns(now, {});
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

  events: {
    /** Wake-up from whoever stored an event; one workflows node gets each. */
    [EVENT_STORED]: {
      handler(ctx: Context<{ event: EventDoc }>) {
        this.consumer.wake(ctx.params.event);
      },
    },
    [RUN_DUE]: {
      handler(ctx: Context<{ id: string }>) {
        this.engine.wake(ctx.params.id);
      },
    },
  },

  methods: {
    async ownRun(tenant, { id, run_id }) {
      const run = await this.runs.findOne(tenant, { id: run_id, workflow_id: id });
      if (!run) throw new ApiError("resource_not_found", `No such run: '${run_id}'`, { param: "run_id" });
      return run;
    },

    async decide(tenant, params, kind) {
      for (let tries = 0; ; tries += 1) {
        const run = await this.ownRun(tenant, params);
        const at = nowIso();
        let set: Partial<RunDoc>;
        if (kind === "cancel") {
          if (TERMINAL.has(run.status)) throw new ApiError("invalid_state", `The run has ended (${run.status})`, { param: "run_id" });
          set = finish(run, "cancelled", at, "cancelled");
        } else {
          const waiting =
            run.status === "waiting" && run.definition[run.cursor]?.type === "approval" && run.steps[run.cursor]?.status === "waiting";
          if (!waiting) throw new ApiError("invalid_state", `The run is not waiting for approval (${run.status})`, { param: "run_id" });
          const steps = [...run.steps];
          if (kind === "approve") {
            steps[run.cursor] = { ...steps[run.cursor], status: "succeeded", output: { approved: true }, finished_at: at };
            set = { status: "running", cursor: run.cursor + 1, steps };
          } else {
            steps[run.cursor] = { ...steps[run.cursor], output: { approved: false } };
            set = finish({ ...run, steps }, "failed", at, "failed", "rejected");
          }
        }
        // The engine's claim goes with the change: a node still in a step of a cancelled run stops
        // at its next write.
        const updated = await this.runs.update(
          tenant,
          { id: run.id, rev: run.rev },
          { $set: { ...set, rev: run.rev + 1, updated_at: at, due_at: Date.now() }, $unset: { lease: true } },
        );
        if (updated) {
          this.broker.emit(RUN_DUE, { id: run.id }).catch(() => undefined);
          return runView(updated);
        }
        if (tries >= 20) throw new ApiError("invalid_state", "The run kept changing; retry", { param: "run_id" });
      }
    },

    async trigger(tenant, events) {
      const incomplete = new Set<string>();
      const started: string[] = [];
      const listening = await this.workflows.find(tenant, { status: "active", "trigger.type": "event" });
      const now = Date.now();
      await Promise.all(
        events.map(async (event: EventDoc) => {
          const targets = listening
            .filter((wf) => wf.trigger.type === "event" && wf.trigger.event_type === event.type && wf.id !== event.origin_workflow_id)
            // Workflows that start each other through their events stop after MAX_CHAIN_DEPTH runs.
            .filter(() => {
              if ((event.chain_depth ?? 0) < MAX_CHAIN_DEPTH) return true;
              this.logger.warn(`event ${event.id} (${event.type}) starts no run: ${MAX_CHAIN_DEPTH} event-started runs led to it`);
              return false;
            });
          if (targets.length === 0) return;
          const root = event.chain_root ?? event.id;
          const budget = {
            id: root,
            limit: QUOTAS.runs_per_event_chain,
            expiresAt: now + this.settings.config.eventRetentionDays * DAY_MS,
          };
          try {
            // A root event opens its chain's budget once; later links find it (or reopen it when pruned).
            if (event.chain_root === undefined) await this.openBudget(tenant, root, budget.expiresAt);
            await Promise.all(
              targets.map(async (wf) => {
                const input = { event: { id: event.id, type: event.type, created_at: event.created_at, data: event.data } };
                const run = newRun(
                  wf,
                  input,
                  { type: "event", event_id: event.id, event_type: event.type },
                  now,
                  (event.chain_depth ?? 0) + 1,
                  root,
                );
                try {
                  if (await this.startCounted(tenant, budget, run)) started.push(run.id);
                  else await this.chainLimited(tenant, root, event, wf.id);
                } catch (err) {
                  // Started already (a sweep racing a wake-up); anything else: the sweep retries.
                  if (!isDuplicate(err)) incomplete.add(event.id);
                }
              }),
            );
          } catch {
            incomplete.add(event.id);
          }
        }),
      );
      for (const id of started) this.engine.wake(id);
      return incomplete;
    },

    async openBudget(tenant, id, expiresAt) {
      try {
        await this.budgets.insert({ id, ...tenant, runs: 0, expires_at: new Date(expiresAt).toISOString() });
      } catch (err) {
        if (!isDuplicate(err)) throw err;
      }
    },

    async startCounted(tenant, { id, limit, expiresAt }, run) {
      for (let tries = 0; tries < 2; tries += 1) {
        // The count and the run are stored together: a run that exists was counted once, a
        // duplicate (the run started already) takes nothing, and two nodes never both take the last.
        const written = await this.store.atomically([
          { op: "update", collection: this.budgets, scope: tenant, filter: { id, runs: { $lt: limit } }, update: { $inc: { runs: 1 } } },
          { op: "insert", collection: this.runs, doc: run },
        ]);
        if (written) return true;
        if (await this.budgets.get(tenant, id)) return false;
        // Not opened yet (a new minute), or pruned under a chain older than the retention period.
        await this.openBudget(tenant, id, expiresAt);
      }
      return false;
    },

    async chainLimited(tenant, root, event, workflowId) {
      const limit = QUOTAS.runs_per_event_chain;
      this.logger.warn(
        `event ${event.id} (${event.type}) does not start workflow ${workflowId}: its chain (root event ${root}) has started ${limit} runs, the most one event may set off`,
      );
      // The trace, once per chain: the first refusal marks the budget and stores workflow.chain_limited with it.
      await recordWith(
        this.store,
        this.events,
        this.broker,
        [
          {
            op: "update",
            collection: this.budgets,
            scope: tenant,
            filter: { id: root, limited_at: { $exists: false } },
            update: { $set: { limited_at: nowIso() } },
          },
        ],
        {
          ...tenant,
          type: "workflow.chain_limited",
          data: { root_event_id: root, event_id: event.id, workflow_id: workflowId, limit },
          source: "workflows",
          chain_depth: event.chain_depth,
          chain_root: root,
        },
      );
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
      return runs;
    },

    checkedSteps(steps, tenant) {
      return checkSteps(steps, { allowPrivate: this.settings.config.webhookAllowPrivateTargets, environment: tenant.environment });
    },
  },

  created() {
    const settings = this.settings.config;
    this.workflows = this.store.collection<WorkflowDoc>("workflows", [
      // One per filter of the list, each ending in `id`: a page is read in order, never sorted.
      { fields: { org_id: 1, environment: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, status: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, "trigger.event_type": 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, "trigger.event_type": 1, status: 1, id: -1 } },
    ]);
    this.runs = this.store.collection<RunDoc>(RUNS_COLLECTION, [
      { fields: { org_id: 1, environment: 1, workflow_id: 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, workflow_id: 1, status: 1, id: -1 } },
      { fields: { trigger_key: 1 }, unique: true, sparse: true },
      // Only runs the engine has work on carry `due_at`: the claim index stays small.
      { fields: { due_at: 1 }, sparse: true },
      ...RUN_RETENTION_INDEXES,
    ]);
    this.events = eventsCollection(this.store);
    this.budgets = this.store.collection<BudgetDoc>("workflow_budgets", [{ fields: { expires_at: 1 } }]);
    this.tally = new Tally(runOutcomesCollection(this.store), (message, err) => this.logger.warn(message, err));
    this.engine = new RunEngine({
      runs: this.runs,
      events: this.events,
      broker: this.broker,
      logger: this.logger,
      allowPrivate: settings.webhookAllowPrivateTargets,
      retryBaseMs: settings.workflowRetryBaseMs,
      maxActive: MAX_ACTIVE_RUNS,
      ended: ({ org_id, environment, data, created_at }) =>
        this.tally.add(runRowsOf({ org_id, environment, workflow_id: String(data.workflow_id) }, created_at), { [String(data.status)]: 1 }),
    });
    this.consumer = new EventConsumer(this.events, "untriggered_since", (tenant, events) => this.trigger(tenant, events), this.logger);
    this.pruner = new Pruner("finished runs", (control) => this.pruneRuns(Date.now(), control), this.logger);
  },

  started() {
    this.engine.start();
    this.sweeper = setInterval(() => void this.consumer.sweep(), SWEEP_MS);
    this.sweeper.unref();
    this.pruner.start();
  },

  /** Finishes the steps in flight and hands their runs back for any node to go on. */
  async stopped() {
    clearInterval(this.sweeper);
    this.consumer.stop();
    await Promise.all([this.engine.stop(), this.pruner.stop()]);
    await this.tally.flush();
  },
};

export default WorkflowsService;
