import { randomUUID } from "node:crypto";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { deliveryView, recoveryView, type DeliveryDoc, type DeliveryView, type RecoveryDoc } from "../../shared/records/deliveries";
import { ApiError, isDuplicate } from "../../shared/errors";
import type { FailureLog } from "../../shared/runtime/failure-log";
import { newId } from "../../shared/ids";
import { webhookRowsOf, type Tally, type WebhookOutcomeRow } from "../../shared/records/outcomes";
import { MAX_COUNTED } from "../../shared/api/pagination";
import { firstIdAt } from "../../shared/records/retention";
import { ALL_TENANTS, type Collection, type Environment } from "../../shared/storage/types";
import type { Recovery } from "../../shared/api/wire";
import { freshDelivery } from "./dispatcher.logic";

/**
 * The delivery log's actions the webhooks API asks for, beside `redeliver` (the dispatcher owns the
 * log): send a pending delivery's next attempt now, send a test event to one webhook, and recover
 * a webhook's failed deliveries of a time range as a background job that any dispatcher node
 * resumes (its state is a document of `webhook_recoveries`).
 */

/** Failed deliveries a recovery redelivers per batch, and the pause between a job's batches (~100 a second). */
export const RECOVER_BATCH = 100;
export const RECOVER_PAUSE_MS = 1000;
/** A node holding a job's batch this long without finishing it (killed) leaves it to another. */
const RECOVER_LEASE_MS = 30_000;
/** How often each node looks for a recovery batch due. */
const RECOVER_POLL_MS = 250;

const tenantParams = {
  org_id: { type: "string", min: 1, max: 100 },
  environment: { type: "enum", values: ["live", "test"] },
} as const;
interface TenantArgs {
  org_id: string;
  environment: Environment;
}

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

const DeliveryActionsSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, This>> = {
  actions: {
    /**
     * Internal, for the webhooks API (which checked the webhook): a pending delivery waiting for its
     * next attempt gets it now. One whose attempt is claimed (in flight, or queued at its throttle's
     * turn) is answered as it is: that attempt is the retry, and nothing is sent twice.
     */
    retryNow: {
      visibility: "public",
      params: { $$strict: true, ...tenantParams, id: { type: "string", min: 1, max: 100 } },
      async handler(ctx: Context<TenantArgs & { id: string }>): Promise<DeliveryView> {
        const { org_id, environment, id } = ctx.params;
        const tenant = { org_id, environment };
        const now = Date.now();
        const updated = await this.deliveries.update(
          tenant,
          { id, status: "pending", lease: null },
          { $set: { due_at: now, next_attempt_at: new Date(now).toISOString() } },
        );
        if (!updated) {
          const current = await this.deliveries.findOne(tenant, { id });
          if (current?.status === "pending") return deliveryView(current);
          throw new ApiError("invalid_state", "The delivery has settled; POST …/redeliver starts a new series of attempts", {
            param: "delivery_id",
          });
        }
        // Claimed here and now; if that fails, a poll finds it due.
        this.claim(id).catch((err: unknown) =>
          this.failures.failed("claiming deliveries", err, "the poll claims them once the store answers"),
        );
        return deliveryView(updated);
      },
    },

    /**
     * Internal, for POST /webhooks/{id}/test: a delivery of an example event to that webhook alone,
     * marked `test` (in the body and on the delivery). Its event is not stored in the event log (no
     * other webhook or workflow sees it); the body is kept on the delivery instead.
     */
    sendTest: {
      visibility: "public",
      params: {
        $$strict: true,
        ...tenantParams,
        webhook_id: { type: "string", min: 1, max: 100 },
        event_type: { type: "string", min: 1, max: 100 },
        data: { type: "object" },
      },
      async handler(ctx: Context<TenantArgs & { webhook_id: string; event_type: string; data: Record<string, unknown> }>) {
        const { org_id, environment, webhook_id, event_type, data } = ctx.params;
        const now = Date.now();
        const at = new Date(now).toISOString();
        const eventId = newId("evt");
        const doc: DeliveryDoc = {
          ...freshDelivery({ org_id, environment }, { id: eventId, type: event_type }, webhook_id, at),
          test: true,
          payload: { id: eventId, type: event_type, created_at: at, data, test: true },
          due_at: now,
        };
        await this.deliveries.insert(doc);
        this.tally.add(webhookRowsOf(doc), { created: 1 });
        this.claim(doc.id).catch((err: unknown) =>
          this.failures.failed("claiming deliveries", err, "the poll claims them once the store answers"),
        );
        return deliveryView(doc);
      },
    },

    /**
     * Internal, for POST /webhooks/{id}/recover: starts the job (one running per webhook: 409 with
     * the running one's id otherwise). Its total is counted now, up to MAX_COUNTED.
     */
    recover: {
      visibility: "public",
      params: {
        $$strict: true,
        ...tenantParams,
        webhook_id: { type: "string", min: 1, max: 100 },
        since: { type: "number", integer: true },
        until: { type: "number", integer: true, optional: true },
      },
      async handler(ctx: Context<TenantArgs & { webhook_id: string; since: number; until?: number }>): Promise<Recovery> {
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
export const DeliveryActionsMixin = DeliveryActionsSchema as Partial<ServiceSchema>;
