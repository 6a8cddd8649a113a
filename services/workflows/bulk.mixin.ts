import { randomUUID } from "node:crypto";
import type { Context, ServiceSchema } from "moleculer";
import { actorOf, tenantOf, type CallMeta } from "../../shared/api/context";
import { ApiError, isDuplicate, notFound } from "../../shared/errors";
import { newId } from "../../shared/ids";
import { MAX_COUNTED, newestFirst, type ListResult } from "../../shared/api/pagination";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { ALL_TENANTS, type Tenant, type Update } from "../../shared/storage/types";
import type { BulkJob } from "../../shared/api/wire";
import {
  BULK_BATCH,
  BULK_LEASE_MS,
  BULK_PAUSE_MS,
  batchFilter,
  bulkView,
  checkFilter,
  pastEnd,
  picks,
  rangeOf,
  type BulkJobDoc,
} from "./bulk.logic";
import {
  bulkJobParams,
  listBulkParams,
  startBulkParams,
  type BulkJobParams,
  type ListBulkParams,
  type StartBulkParams,
} from "./bulk.params";
import { cancel, retry } from "./run-decisions.logic";
import type { RunDoc } from "./run-doc";
import type { RunWrite } from "./run-write.logic";
import type { RunsMethods, RunsVars } from "./runs.mixin";
import { rerunFrom } from "./rerun-from.logic";
import type { WorkflowDoc } from "./workflows.logic";

/** How often each node looks for a bulk job's batch due. */
const BULK_POLL_MS = 250;

/** What acting on one run came to: done, refused (why), or to be tried again after `waitMs` (the start budget is spent). */
type Outcome = { ok: true } | { ok: false; error: string } | { waitMs: number };

/** Thrown from a transition: the run carries this job's mark already (a batch done again). */
class AlreadyDone extends Error {}

interface BulkVars extends RunsVars {
  bulkTimer?: NodeJS.Timeout;
  bulking?: Promise<void>;
  bulkStopping?: boolean;
}
interface BulkMethods extends RunsMethods {
  bulkTick(): void;
  bulkBatch(): Promise<boolean>;
  bulkAct(job: BulkJobDoc, run: RunDoc, workflows: Map<string, WorkflowDoc | null>): Promise<Outcome>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * Bulk operations on runs (POST /runs/bulk): a job stored in `workflow_bulk_jobs` walks the runs its
 * filter picks in id order, a batch of BULK_BATCH at a time with a pause between batches, taken
 * by whichever workflows node claims it next (as webhook recoveries are). A batch's runs are
 * stored on the job before the first is acted on, and each run acted on carries the job's mark
 * (retry, cancel) or key (rerun), so a node killed mid-batch leaves the batch to the next node,
 * which acts on each run once and counts it once.
 */
export const BulkMixin: Partial<ServiceSchema<PlatformSettings, BulkMethods, BulkVars>> = {
  actions: {
    /** POST /runs/bulk — workflows:write; 202 with the job. One running job per environment (409 otherwise). */
    startBulk: {
      params: startBulkParams,
      async handler(ctx: Ctx<StartBulkParams>): Promise<BulkJob> {
        const tenant = tenantOf(ctx);
        const filter = checkFilter(ctx.params.action, ctx.params.filter);
        const now = Date.now();
        const range = rangeOf(filter, now);
        const n = await this.runs.count(tenant, batchFilter({ action: ctx.params.action, filter, ...range }), { limit: MAX_COUNTED + 1 });
        const at = new Date(now).toISOString();
        const doc: BulkJobDoc = {
          id: newId("blk"),
          ...tenant,
          action: ctx.params.action,
          filter,
          status: "running",
          total: Math.min(n, MAX_COUNTED),
          ...(n > MAX_COUNTED && { total_capped: true as const }),
          matched: 0,
          done: 0,
          failed: 0,
          last_error: null,
          created_by: actorOf(ctx),
          created_at: at,
          updated_at: at,
          finished_at: null,
          running: `${tenant.org_id}/${tenant.environment}`,
          ...range,
          due_at: now,
        };
        try {
          await this.bulkJobs.insert(doc);
        } catch (err) {
          if (!isDuplicate(err)) throw err;
          const running = await this.bulkJobs.findOne(tenant, { running: doc.running as string });
          throw new ApiError(
            "invalid_state",
            `A bulk job is running in this environment (${running?.id ?? "just started"}); wait for it or cancel it`,
            {
              param: "action",
            },
          );
        }
        this.bulkTick();
        return bulkView(doc);
      },
    },

    /** GET /runs/bulk/{job_id} — workflows:read */
    getBulk: {
      params: bulkJobParams,
      async handler(ctx: Ctx<BulkJobParams>): Promise<BulkJob> {
        const job = await this.bulkJobs.findOne(tenantOf(ctx), { id: ctx.params.job_id });
        if (!job) throw new ApiError("resource_not_found", `No such bulk job: '${ctx.params.job_id}'`, { param: "job_id" });
        return bulkView(job);
      },
    },

    /** GET /runs/bulk — workflows:read; newest first. */
    listBulk: {
      params: listBulkParams,
      handler(ctx: Ctx<ListBulkParams>): Promise<ListResult<BulkJob>> {
        return newestFirst(this.bulkJobs, tenantOf(ctx), {}, ctx.params, bulkView);
      },
    },

    /** POST /runs/bulk/{job_id}/cancel — workflows:write; the batch under way finishes, no other starts. A job that has ended is a conflict. */
    cancelBulk: {
      params: bulkJobParams,
      async handler(ctx: Ctx<BulkJobParams>): Promise<BulkJob> {
        const tenant = tenantOf(ctx);
        const at = new Date().toISOString();
        const job = await this.bulkJobs.update(
          tenant,
          { id: ctx.params.job_id, status: "running" },
          { $set: { status: "cancelled", finished_at: at, updated_at: at }, $unset: { running: true, due_at: true } },
        );
        if (job) return bulkView(job);
        const found = await this.bulkJobs.findOne(tenant, { id: ctx.params.job_id });
        if (!found) throw new ApiError("resource_not_found", `No such bulk job: '${ctx.params.job_id}'`, { param: "job_id" });
        throw new ApiError("invalid_state", `The bulk job has ended (${found.status})`, { param: "job_id" });
      },
    },
  },

  methods: {
    /** Runs the batches due, one after the other, on this node; never two at once here. */
    bulkTick() {
      if (this.bulking || this.bulkStopping) return;
      this.bulking = (async () => {
        try {
          for (let i = 0; i < 10 && !this.bulkStopping && (await this.bulkBatch()); i++) {
            // one batch done; another job may be due
          }
        } catch (err) {
          this.logger.warn("bulk job batch failed; it is taken again when its lease runs out", err);
        } finally {
          this.bulking = undefined;
        }
      })();
    },

    /**
     * Claims the most overdue job and acts on its next batch: the batch left by a node that
     * stopped mid-way, else the next BULK_BATCH runs after its cursor along the index, the ones
     * the action applies to stored on the job first. Answers whether a job was taken.
     */
    async bulkBatch() {
      const now = Date.now();
      const lease = randomUUID();
      const job = await this.bulkJobs.update(
        ALL_TENANTS,
        { status: "running", due_at: { $lte: now } },
        { $set: { due_at: now + BULK_LEASE_MS, lease } },
        { sort: { due_at: 1 } },
      );
      if (!job) return false;
      const tenant = { org_id: job.org_id, environment: job.environment };
      let ids = job.batch;
      let end = job.batch_end;
      let last = job.batch_last === true;
      if (!ids) {
        const got = await this.runs.find(tenant, batchFilter(job, false), { sort: { id: 1 }, limit: BULK_BATCH });
        const read = got.filter((r) => !pastEnd(job, r));
        ids = read.filter((r) => picks(job, r)).map((r) => r.id);
        end = read.at(-1)?.id;
        last = read.length < got.length || got.length < BULK_BATCH;
        const held = await this.bulkJobs.update(
          ALL_TENANTS,
          { id: job.id, lease, status: "running" },
          { $set: { batch: ids, ...(end !== undefined && { batch_end: end }), ...(last && { batch_last: true as const }) } },
        );
        if (!held) return true;
      }
      const runs = new Map((ids.length > 0 ? await this.runs.find(tenant, { id: { $in: ids } }) : []).map((r) => [r.id, r]));
      const workflows = new Map<string, WorkflowDoc | null>();
      let matched = 0;
      let done = 0;
      let failed = 0;
      let lastError: string | undefined;
      let waitMs: number | undefined;
      let at = 0;
      for (; at < ids.length && !this.bulkStopping; at++) {
        const run = runs.get(ids[at]);
        // Pruned meanwhile: nothing to act on.
        const outcome: Outcome = run ? await this.bulkAct(job, run, workflows) : { ok: false, error: `Run ${ids[at]} no longer exists` };
        if ("waitMs" in outcome) {
          waitMs = outcome.waitMs;
          break;
        }
        matched += 1;
        if (outcome.ok) done += 1;
        else {
          failed += 1;
          lastError = outcome.error;
        }
      }
      const rest = ids.slice(at);
      const updatedAt = new Date().toISOString();
      const $inc = { matched, done, failed };
      const said = lastError !== undefined ? { last_error: lastError } : {};
      const moved: Update =
        rest.length > 0
          ? { $set: { batch: rest, updated_at: updatedAt, ...said }, $inc }
          : {
              $set: { cursor: end ?? job.cursor, started: true, updated_at: updatedAt, ...said },
              $inc,
              $unset: { batch: true, batch_end: true, batch_last: true },
            };
      const next: Update =
        rest.length === 0 && last
          ? {
              $set: { ...moved.$set, status: "succeeded", finished_at: updatedAt },
              $inc,
              $unset: { ...moved.$unset, running: true, due_at: true, lease: true },
            }
          : { ...moved, $set: { ...moved.$set, due_at: Date.now() + (waitMs ?? BULK_PAUSE_MS) }, $unset: { ...moved.$unset, lease: true } };
      const stored = await this.bulkJobs.update(ALL_TENANTS, { id: job.id, lease, status: "running" }, next);
      // Cancelled meanwhile: the batch's runs are counted, and the job stays cancelled.
      if (!stored) await this.bulkJobs.update(ALL_TENANTS, { id: job.id, lease }, { ...moved, $unset: { ...moved.$unset, lease: true } });
      return true;
    },

    async bulkAct(job, run, workflows) {
      const tenant = { org_id: job.org_id, environment: job.environment } as Required<Tenant>;
      const workflowOf = async (id: string) => {
        if (!workflows.has(id)) workflows.set(id, await this.workflows.get(tenant, id));
        return workflows.get(id) ?? null;
      };
      const marked = (transition: (r: RunDoc, now: number) => RunWrite) => (r: RunDoc, now: number) => {
        if (r.bulk_job === job.id) throw new AlreadyDone();
        const write = transition(r, now);
        return { ...write, set: { ...write.set, bulk_job: job.id } };
      };
      try {
        if (job.action === "cancel") {
          await this.decide(
            tenant,
            { id: run.workflow_id, run_id: run.id },
            marked((r, now) => cancel(r, now, { by: job.created_by })),
          );
          return { ok: true };
        }
        const workflow = await workflowOf(run.workflow_id);
        if (!workflow) throw notFound("workflow", run.workflow_id);
        if (job.action === "retry") {
          await this.decide(tenant, { id: run.workflow_id, run_id: run.id }, marked(retry));
          return { ok: true };
        }
        if (workflow.status !== "active") throw new ApiError("invalid_state", `The workflow ${workflow.id} is inactive`, { param: "id" });
        const fresh = { ...rerunFrom(workflow, run, Date.now()), trigger_key: `bulk/${job.id}/${run.id}` };
        await this.startApiRun(tenant, fresh);
        return { ok: true };
      } catch (err) {
        // Acted on already, by this job (a batch done again after its node stopped).
        if (err instanceof AlreadyDone || (job.action === "rerun" && isDuplicate(err))) return { ok: true };
        if (err instanceof ApiError && err.type === "rate_limited") {
          const retryAfter = Number((err.data as { retry_after?: number } | undefined)?.retry_after ?? 1);
          return { waitMs: retryAfter * 1000 };
        }
        if (err instanceof ApiError && err.code < 500) return { ok: false, error: `${run.id}: ${err.message}` };
        throw err;
      }
    },
  },

  started() {
    this.bulkStopping = false;
    this.bulkTimer = setInterval(() => this.bulkTick(), BULK_POLL_MS);
    this.bulkTimer.unref();
  },

  /** The batch under way stops after the run in hand; the rest of it is left on the job for whichever node runs next. */
  async stopped() {
    this.bulkStopping = true;
    clearInterval(this.bulkTimer);
    await this.bulking;
  },
};
