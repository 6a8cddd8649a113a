import { randomUUID } from "node:crypto";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DISABLE_AFTER_FAILURES, recoveryView, type DeliveryDoc, type RecoveryDoc } from "../../shared/records/deliveries";
import { ApiError, isDuplicate } from "../../shared/errors";
import type { FailureLog } from "../../shared/runtime/failure-log";
import { newId } from "../../shared/ids";
import { webhookRowsOf, type Tally, type WebhookOutcomeRow } from "../../shared/records/outcomes";
import { MAX_COUNTED } from "../../shared/api/pagination";
import { firstIdAt } from "../../shared/records/retention";
import { ALL_TENANTS, type Collection } from "../../shared/storage/types";
import type { Recovery } from "../../shared/api/wire";
import { recoverParams, type RecoverParams } from "./dispatcher.params";

/**
 * Recovery jobs (POST /webhooks/{id}/recover): a webhook's failed deliveries of a time range are
 * redelivered in the background, a batch at a time, by whichever dispatcher node takes the job's
 * next batch (its state is a document of `webhook_recoveries`).
 */

/**
 * Failed deliveries a recovery redelivers per batch: as many as failures in a row disable the
 * webhook. Each failed attempt of a batch's deliveries counts toward the auto-disable, and the next
 * batch waits for their first attempts, so a receiver that still fails gets one batch and the job
 * stops (docs/webhooks-amplification.md). The pause between a job's batches, and before it looks
 * again at a batch still waiting for first attempts.
 */
export const RECOVER_BATCH = DISABLE_AFTER_FAILURES;
export const RECOVER_PAUSE_MS = 250;
/** A node holding a job's batch this long without finishing it (killed) leaves it to another. */
const RECOVER_LEASE_MS = 30_000;
/** How often each node looks for a recovery batch due. */
const RECOVER_POLL_MS = 250;

/** What the dispatcher's schema gives these actions (its store declaration, tally and `claim`). */
interface This {
  deliveries: Collection<DeliveryDoc>;
  recoveries: Collection<RecoveryDoc>;
  tally: Tally<WebhookOutcomeRow>;
  failures: FailureLog;
  stopping: boolean;
  claim(id?: string): Promise<boolean>;
  /** Set here. */
  recoverGate(job: RecoveryDoc, lease: string): Promise<"go" | "wait" | "stop">;
  recoverTimer?: NodeJS.Timeout;
  recovering?: Promise<void>;
  recoverBatch(): Promise<boolean>;
  recoverTick(): void;
}

const RecoverySchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, This>> = {
  actions: {
    /**
     * Internal, for POST /webhooks/{id}/recover: starts the job (one running per webhook: 409 with
     * the running one's id otherwise). Its total is counted now, up to MAX_COUNTED.
     */
    recover: {
      visibility: "public",
      params: recoverParams,
      async handler(ctx: Context<RecoverParams>): Promise<Recovery> {
        const { org_id, environment, webhook_id, since, until } = ctx.params;
        const tenant = { org_id, environment };
        const cursor = firstIdAt("del", since);
        const end = until === undefined ? undefined : firstIdAt("del", until);
        const n = await this.deliveries.count(
          tenant,
          { webhook_id, status: "failed", id: { $gte: cursor, ...(end !== undefined && { $lt: end }) } },
          { limit: MAX_COUNTED + 1 },
        );
        const now = Date.now();
        const at = new Date(now).toISOString();
        const doc: RecoveryDoc = {
          id: newId("rcv"),
          org_id,
          environment,
          webhook_id,
          status: "running",
          since: new Date(since).toISOString(),
          until: until === undefined ? null : new Date(until).toISOString(),
          total: Math.min(n, MAX_COUNTED),
          ...(n > MAX_COUNTED && { total_capped: true as const }),
          done: 0,
          created_at: at,
          updated_at: at,
          finished_at: null,
          running: webhook_id,
          cursor,
          ...(end !== undefined && { end }),
          due_at: now,
        };
        try {
          await this.recoveries.insert(doc);
        } catch (err) {
          if (!isDuplicate(err)) throw err;
          const running = await this.recoveries.findOne(tenant, { running: webhook_id });
          throw new ApiError(
            "invalid_state",
            `A recovery of this webhook is running (${running?.id ?? "just started"}); wait for it to end`,
            {
              param: "id",
            },
          );
        }
        this.recoverTick();
        return recoveryView(doc);
      },
    },
  },

  methods: {
    /** Runs the batches due, one after the other, on this node; never two at once here. */
    recoverTick() {
      if (this.recovering || this.stopping) return;
      this.recovering = (async () => {
        try {
          for (let i = 0; i < 10 && !this.stopping && (await this.recoverBatch()); i++) {
            // one batch done; another job may be due
          }
          this.failures.ok("recovering deliveries");
        } catch (err) {
          this.failures.failed("recovering deliveries", err, "the job's batch is taken again when its lease runs out");
        } finally {
          this.recovering = undefined;
        }
      })();
    },

    /**
     * Whether a job's next batch may go: its last batch's deliveries have each made their first
     * attempt (or settled), and its webhook is still enabled; a webhook disabled or deleted
     * meanwhile stops the job. Waiting or stopping is written here, under the job's lease.
     */
    async recoverGate(job, lease) {
      const tenant = { org_id: job.org_id, environment: job.environment };
      if (job.batch && job.batch.length > 0) {
        const last = await this.deliveries.find(tenant, { id: { $in: job.batch } });
        if (last.some((d) => d.status === "pending" && d.attempts.length <= d.series_start)) {
          await this.recoveries.update(
            ALL_TENANTS,
            { id: job.id, lease },
            { $set: { due_at: Date.now() + RECOVER_PAUSE_MS }, $unset: { lease: true } },
          );
          return "wait";
        }
      }
      const target = await this.broker.call<{ status: string } | null, object>("webhooks.target", {
        org_id: job.org_id,
        id: job.webhook_id,
      });
      if (target?.status === "enabled") return "go";
      const at = new Date().toISOString();
      await this.recoveries.update(
        ALL_TENANTS,
        { id: job.id, lease },
        {
          $set: { status: "stopped", finished_at: at, updated_at: at },
          $unset: { running: true, due_at: true, lease: true, batch: true },
        },
      );
      return "stop";
    },

    /**
     * Claims the most overdue job and, once its gate lets it (recoverGate), redelivers its next
     * batch: the failed deliveries after its cursor, in id order along the (webhook, status, id)
     * index, each moved back to pending (due now, a new series, started by hand) with a
     * compare-and-set on `failed`, so a batch run twice (a lease that ran out) redelivers nothing
     * twice. Answers whether a job was taken.
     */
    async recoverBatch() {
      const now = Date.now();
      const lease = randomUUID();
      const job = await this.recoveries.update(
        ALL_TENANTS,
        { status: "running", due_at: { $lte: now } },
        { $set: { due_at: now + RECOVER_LEASE_MS, lease } },
        { sort: { due_at: 1 } },
      );
      if (!job) return false;
      if ((await this.recoverGate(job, lease)) !== "go") return true;
      const tenant = { org_id: job.org_id, environment: job.environment };
      const batch = await this.deliveries.find(
        tenant,
        { webhook_id: job.webhook_id, status: "failed", id: { $gt: job.cursor, ...(job.end !== undefined && { $lt: job.end }) } },
        { sort: { id: 1 }, limit: RECOVER_BATCH },
      );
      const moved: string[] = [];
      const at = new Date().toISOString();
      for (const d of batch) {
        const updated = await this.deliveries.update(
          tenant,
          { id: d.id, status: "failed" },
          {
            $set: {
              status: "pending",
              series_start: d.attempts.length,
              due_at: Date.now(),
              next_attempt_at: at,
              updated_at: at,
              manual: true,
            },
            $unset: { lease: true },
          },
        );
        if (!updated) continue;
        moved.push(d.id);
        // Out of its settled count, as a redelivery is.
        this.tally.add(webhookRowsOf(updated), { failed: -1 });
      }
      const done = moved.length;
      const finished = batch.length < RECOVER_BATCH;
      const updatedAt = new Date().toISOString();
      await this.recoveries.update(
        ALL_TENANTS,
        { id: job.id, lease },
        finished
          ? {
              $set: { status: "succeeded", finished_at: updatedAt, updated_at: updatedAt, cursor: batch.at(-1)?.id ?? job.cursor },
              $inc: { done },
              $unset: { running: true, due_at: true, lease: true, batch: true },
            }
          : {
              $set: { cursor: batch[batch.length - 1].id, batch: moved, due_at: Date.now() + RECOVER_PAUSE_MS, updated_at: updatedAt },
              $inc: { done },
              $unset: { lease: true },
            },
      );
      // Redelivered ones are due now: claimed here rather than at the next poll.
      for (const id of moved) void this.claim(id).catch(() => undefined);
      return true;
    },
  },

  started() {
    this.recoverTimer = setInterval(() => this.recoverTick(), RECOVER_POLL_MS);
    this.recoverTimer.unref();
  },

  /** A batch under way finishes; the job's next batch is due for whichever node runs next. */
  async stopped() {
    clearInterval(this.recoverTimer);
    await this.recovering;
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const RecoveryMixin = RecoverySchema as Partial<ServiceSchema>;
