import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { instantOf } from "../../shared/api/pagination";
import type { Schedule, ScheduleBackfill, ScheduleTrigger } from "../../shared/api/wire";
import { ApiError, invalidParam, isDuplicate } from "../../shared/errors";
import { FailureLog } from "../../shared/runtime/failure-log";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { traceOf } from "../../shared/runtime/trace";
import { ALL_TENANTS, type Tenant } from "../../shared/storage/types";
import type { Budget } from "./run-starts.mixin";
import type { RunDoc } from "./run-doc";
import type { RunView } from "./run-view.logic";
import type { RunsMethods, RunsVars } from "./runs.mixin";
import { newRun } from "./runs.logic";
import { isSchedule, nextMove, scheduleKey, scheduleView, type ScheduleState, type TickMove } from "./schedule-ticks.logic";
import { ticksIn } from "./schedule-trigger.logic";
import { BACKFILL_MAX_TICKS, backfillParams, type BackfillParams } from "./schedules.params";
import type { WorkflowDoc } from "./workflows.logic";
import type { IdParams } from "./workflows.params";
import { idParams } from "./workflows.params";

/** How often each node looks for due schedules. */
const POLL_MS = 250;
/** Due schedules read at once, and how many of them one node moves at a time. */
const BATCH = 200;
const CONCURRENCY = 64;
/** Moves of one schedule per visit (a schedule far behind catches up over several passes). */
const MOVES_PER_VISIT = 20;
const MINUTE_MS = 60_000;
const RUNNING = new Set(["queued", "running", "waiting"]);

type Scheduled = WorkflowDoc & { trigger: ScheduleTrigger; schedule: ScheduleState };
type Outcome = "started" | "existed" | "lost" | "spent";

interface SchedulesVars extends RunsVars {
  scheduler: NodeJS.Timeout | undefined;
  ticking: Promise<void> | undefined;
  scheduleFailures: FailureLog;
}
interface SchedulesMethods extends RunsMethods {
  /** One pass: every due schedule moved (a run started, a tick skipped, buffered or recorded missed). */
  tickSchedules(): Promise<void>;
  /** Moves one due schedule until it is no longer due, another node moved it, or its tenant's start budget is spent. */
  tickOne(workflow: Scheduled): Promise<void>;
  /** Stores `next` over the schedule at revision `rev` (the compare-and-set); false when another write came first. */
  saveSchedule(workflow: Scheduled, rev: number, next: ScheduleState): Promise<boolean>;
  /** Starts the run of the move's tick and stores the move, in one write counted against the start budget. */
  startTick(workflow: Scheduled, rev: number, move: TickMove & { start: number }): Promise<{ outcome: Outcome; runId?: string }>;
  /** The run of a tick or a backfill: the schedule's input, the tick's unique key. */
  tickRun(workflow: Scheduled, tick: number, source: "tick" | "backfill"): RunDoc;
  /** The active workflow `id` with a schedule trigger (409 for another trigger or an inactive workflow). */
  ownSchedule(tenant: Required<Tenant>, id: string): Promise<Scheduled>;
}
type Ctx<P> = Context<P, CallMeta>;

const tenantOfDoc = (wf: WorkflowDoc): Required<Tenant> => ({ org_id: wf.org_id, environment: wf.environment });
const iso = (ms: number): string => new Date(ms).toISOString();

/** RUN_STARTS_PER_MINUTE refused a backfill's run: how many it started, and that sending it again starts only the rest. */
function backfillRefused(budget: Budget, started: number, now: number): ApiError {
  const minute = budget.expiresAt - 60 * MINUTE_MS;
  return new ApiError(
    "rate_limited",
    `Quota runs_started_per_minute reached after ${started} runs of the backfill: at most ${budget.limit} runs may be started per minute in this environment; send the same backfill again later, it starts only the ticks that have no run`,
    { quota: "runs_started_per_minute", limit: budget.limit, retry_after: Math.max(1, Math.ceil((minute + MINUTE_MS - now) / 1000)) },
  );
}

/**
 * Schedule triggers: every workflows node looks for due schedules (one indexed read across tenants)
 * and moves each by a compare-and-set on its revision; a tick's run is stored in the same write, with
 * a key unique per workflow and tick, and counted against the environment's start budget. The
 * engine then takes it in the tenant's turn like any run. Time is the platform's clock (a test's own
 * in tests). A mixin of the workflows service.
 */
export const SchedulesMixin: Partial<ServiceSchema<PlatformSettings, SchedulesMethods, SchedulesVars>> = {
  actions: {
    /** GET /workflows/{id}/schedule — workflows:read; the next ticks, and the ticks that started no run. */
    getSchedule: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<Schedule> {
        const wf = await this.ownWorkflow(tenantOf(ctx), ctx.params.id);
        if (!isSchedule(wf.trigger))
          throw new ApiError("resource_not_found", `The workflow's trigger is ${JSON.stringify(wf.trigger.type)}: it has no schedule`, {
            param: "id",
          });
        return scheduleView(wf.id, wf.trigger, wf.schedule);
      },
    },

    /** POST /workflows/{id}/schedule/trigger — workflows:write; a run now, with the schedule's input, whatever the overlap policy. */
    triggerSchedule: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<RunView> {
        const tenant = tenantOf(ctx);
        const wf = await this.ownSchedule(tenant, ctx.params.id);
        const trigger = { type: "schedule" as const, scheduled_at: iso(this.settings.clock.now()), source: "trigger" as const };
        return this.startApiRun(tenant, { ...newRun(wf, wf.trigger.input, trigger, Date.now()), ...traceOf(ctx.meta) });
      },
    },

    /**
     * POST /workflows/{id}/schedule/backfill — workflows:write; a run for each tick in [from, to)
     * that has none (at most BACKFILL_MAX_TICKS), whatever the overlap policy. Sent again, it starts
     * only the ticks still without a run.
     */
    backfillSchedule: {
      params: backfillParams,
      async handler(ctx: Ctx<BackfillParams>): Promise<ScheduleBackfill> {
        const tenant = tenantOf(ctx);
        const wf = await this.ownSchedule(tenant, ctx.params.id);
        const from = instantOf("from", ctx.params.from);
        const to = instantOf("to", ctx.params.to);
        const now = this.settings.clock.now();
        if (to <= from) throw invalidParam("to", "to must be after from");
        if (to > now)
          throw invalidParam("to", `to must not be after now (${iso(now)}): a backfill starts past ticks, the schedule the coming ones`);
        const { ticks, more } = ticksIn(wf.trigger, from, to, BACKFILL_MAX_TICKS);
        if (more)
          throw invalidParam("to", `the range holds more than ${BACKFILL_MAX_TICKS} ticks: backfill at most ${BACKFILL_MAX_TICKS} at once`);
        await this.store.checkStorageQuota(tenant);
        const budget = this.startsBudget(tenant, now);
        const answer: ScheduleBackfill = {
          object: "schedule_backfill",
          workflow_id: wf.id,
          from: iso(from),
          to: iso(to),
          ticks: ticks.length,
          started: [],
          already_started: [],
        };
        for (const tick of ticks) {
          const run = { ...this.tickRun(wf, tick, "backfill"), ...traceOf(ctx.meta) };
          try {
            if ((await this.startCounted(tenant, [budget], run)) !== null) throw backfillRefused(budget, answer.started.length, now);
            answer.started.push({ scheduled_at: iso(tick), run_id: run.id });
            this.engine.wake(run.id, tenant);
          } catch (err) {
            if (!isDuplicate(err)) throw err;
            answer.already_started.push(iso(tick));
          }
        }
        return answer;
      },
    },
  },

  methods: {
    async ownSchedule(tenant, id) {
      const wf = await this.ownWorkflow(tenant, id);
      if (!isSchedule(wf.trigger))
        throw new ApiError("invalid_state", `The workflow's trigger is ${JSON.stringify(wf.trigger.type)}, not a schedule`, {
          param: "id",
        });
      if (wf.status !== "active")
        throw new ApiError("invalid_state", "The workflow is inactive; activate it (PATCH status: active) to run it", { param: "id" });
      return wf as Scheduled;
    },

    tickRun(wf, tick, source) {
      const trigger = { type: "schedule" as const, scheduled_at: iso(tick), source };
      return { ...newRun(wf, wf.trigger.input, trigger, Date.now()), trigger_key: scheduleKey(wf.id, tick) };
    },

    async tickSchedules() {
      for (let pass = 0; pass < 5; pass += 1) {
        const found = (await this.workflows.find(
          ALL_TENANTS,
          { "schedule.due_at": { $lte: this.settings.clock.now() } },
          { sort: { "schedule.due_at": 1 }, limit: BATCH },
        )) as Scheduled[];
        const due = found.filter((wf) => isSchedule(wf.trigger) && wf.schedule !== undefined);
        // Each node walks the batch from its own place, so two nodes seldom race for one schedule.
        const offset = Math.floor(Math.random() * due.length);
        const queue = [...due.slice(offset), ...due.slice(0, offset)];
        let failure: unknown;
        const worker = async () => {
          // One schedule failing (the store refusing a write) leaves the others of the batch to move.
          for (let wf = queue.shift(); wf; wf = queue.shift()) await this.tickOne(wf).catch((err: unknown) => (failure ??= err));
        };
        await Promise.all(Array.from({ length: CONCURRENCY }, worker));
        if (failure !== undefined) throw failure;
        if (found.length < BATCH) return;
      }
    },

    async tickOne(wf) {
      const tenant = tenantOfDoc(wf);
      let state = wf.schedule;
      for (let moves = 0; moves < MOVES_PER_VISIT; moves += 1) {
        const now = this.settings.clock.now();
        let running = false;
        if (state.last_run_id && (wf.trigger.overlap !== "allow" || state.buffered_at !== undefined)) {
          const last = await this.runs.get(tenant, state.last_run_id);
          running = last !== null && RUNNING.has(last.status);
        }
        const move = nextMove(state, wf.trigger, now, running);
        if (!move) return;
        if (move.start === null) {
          if (!(await this.saveSchedule(wf, state.rev, move.next))) return;
          state = move.next;
          continue;
        }
        const { outcome, runId } = await this.startTick(wf, state.rev, move as TickMove & { start: number });
        if (outcome === "lost") return;
        if (outcome === "spent") {
          // The environment's RUN_STARTS_PER_MINUTE is spent: the tick waits for the next minute (late, or missed past the window).
          const nextMinute = now - (now % MINUTE_MS) + MINUTE_MS;
          await this.saveSchedule(wf, state.rev, { ...state, rev: state.rev + 1, due_at: nextMinute });
          this.logger.info(`workflow ${wf.id}: its tick waits for the next minute, the environment's RUN_STARTS_PER_MINUTE is spent`);
          return;
        }
        state = runId ? { ...move.next, last_run_id: runId } : move.next;
      }
    },

    async saveSchedule(wf, rev, next) {
      const saved = await this.workflows.update(
        tenantOfDoc(wf),
        { id: wf.id, version: wf.version, status: "active", "schedule.rev": rev },
        { $set: { schedule: next } },
      );
      return saved !== null;
    },

    async startTick(wf, rev, move) {
      const tenant = tenantOfDoc(wf);
      const budget = this.startsBudget(tenant, this.settings.clock.now());
      const run = this.tickRun(wf, move.start, "tick");
      for (let tries = 0; tries < 2; tries += 1) {
        let written;
        try {
          written = await this.store.atomically([
            {
              op: "update",
              collection: this.budgets,
              scope: tenant,
              filter: { id: budget.id, runs: { $lt: budget.limit } },
              update: { $inc: { runs: 1 } },
            },
            {
              op: "update",
              collection: this.workflows,
              scope: tenant,
              filter: { id: wf.id, version: wf.version, status: "active", "schedule.rev": rev },
              update: { $set: { schedule: { ...move.next, last_run_id: run.id } } },
            },
            { op: "insert", collection: this.runs, doc: run },
          ]);
        } catch (err) {
          if (!isDuplicate(err)) throw err;
          // The tick has its run already (a backfill started it): the schedule moves on without another.
          return { outcome: (await this.saveSchedule(wf, rev, move.next)) ? "existed" : "lost" };
        }
        if (written) {
          this.engine.wake(run.id, tenant);
          return { outcome: "started", runId: run.id };
        }
        const stored = await this.budgets.get(tenant, budget.id);
        if (!stored) await this.openBudget(tenant, budget.id, budget.expiresAt);
        else return { outcome: stored.runs >= budget.limit ? "spent" : "lost" };
      }
      return { outcome: "lost" };
    },
  },

  created() {
    this.scheduleFailures = new FailureLog(this.logger);
  },

  started() {
    this.scheduler = setInterval(() => {
      if (this.ticking) return;
      this.ticking = this.tickSchedules()
        .then(
          () => this.scheduleFailures.ok("ticking schedules"),
          (err: unknown) => this.scheduleFailures.failed("ticking schedules", err, "the next pass moves them once the store answers"),
        )
        .finally(() => {
          this.ticking = undefined;
        });
    }, POLL_MS);
    this.scheduler.unref();
  },

  async stopped() {
    clearInterval(this.scheduler);
    await this.ticking;
  },
};
