import { randomUUID } from "node:crypto";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { recoveryView, type DeliveryDoc, type RecoveryDoc } from "../../shared/records/deliveries";
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

/** Failed deliveries a recovery redelivers per batch, and the pause between a job's batches (~100 a second). */
export const RECOVER_BATCH = 100;
export const RECOVER_PAUSE_MS = 1000;
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
     * Claims the most overdue job and redelivers its next batch: the failed deliveries after its
     * cursor, in id order along the (webhook, status, id) index, each moved back to pending (due
     * now, a new series) with a compare-and-set on `failed`, so a batch run twice (a lease that
     * ran out) redelivers nothing twice. Answers whether a batch ran.
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
      const tenant = { org_id: job.org_id, environment: job.environment };
      const batch = await this.deliveries.find(
        tenant,
        { webhook_id: job.webhook_id, status: "failed", id: { $gt: job.cursor, ...(job.end !== undefined && { $lt: job.end }) } },
        { sort: { id: 1 }, limit: RECOVER_BATCH },
      );
      let done = 0;
      const at = new Date().toISOString();
      for (const d of batch) {
        const moved = await this.deliveries.update(
          tenant,
          { id: d.id, status: "failed" },
          {
            $set: { status: "pending", series_start: d.attempts.length, due_at: Date.now(), next_attempt_at: at, updated_at: at },
            $unset: { lease: true },
          },
        );
        if (!moved) continue;
        done += 1;
        // Out of its settled count, as a redelivery is.
        this.tally.add(webhookRowsOf(moved), { failed: -1 });
      }
      const finished = batch.length < RECOVER_BATCH;
      const updatedAt = new Date().toISOString();
      await this.recoveries.update(
        ALL_TENANTS,
        { id: job.id, lease },
        finished
          ? {
              $set: { status: "succeeded", finished_at: updatedAt, updated_at: updatedAt, cursor: batch.at(-1)?.id ?? job.cursor },
              $inc: { done },
              $unset: { running: true, due_at: true, lease: true },
            }
          : {
              $set: { cursor: batch[batch.length - 1].id, due_at: Date.now() + RECOVER_PAUSE_MS, updated_at: updatedAt },
              $inc: { done },
              $unset: { lease: true },
            },
      );
      // Redelivered ones are due now: claimed here rather than at the next poll.
      if (done > 0) void this.claim().catch(() => undefined);
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
