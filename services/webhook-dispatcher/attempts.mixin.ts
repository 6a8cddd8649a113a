import type { ServiceSchema } from "moleculer";
import type { Attempt } from "../../shared/records/deliveries";
import { isDuplicate } from "../../shared/errors";
import { payloadOf, type EventPayload } from "../../shared/records/events";
import { attemptRowsOf, webhookRowsOf } from "../../shared/records/outcomes";
import { childTraceparent } from "../../shared/runtime/trace";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { deliveryHeaders } from "../../shared/net/signing";
import { ALL_TENANTS } from "../../shared/storage/types";
import { outcomeOf, settledDelivery, settlement } from "./dispatcher.logic";
import { DETAILED_ATTEMPTS_MAX, requestOf } from "./capture";
import { LEASE_MARGIN_MS, LOCAL_TIMER_MAX_MS, type DispatcherMethods, type DispatcherVars, type Target } from "./dispatcher.types";

/**
 * One attempt of a delivery and its outcome: the request signed and sent, the attempt appended to
 * the delivery (or the delivery's one write, for a first attempt not stored yet), its retry
 * scheduled, the counts and metrics, and the webhook's failure streak.
 */
const AttemptsSchema: Partial<ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars>> = {
  methods: {
    leaseMs() {
      return this.sender.longestAttemptMs + LEASE_MARGIN_MS;
    },

    async attempt(job) {
      if (this.stopping) return this.written(job, "failed");
      // A claimed row written for it: sent from here only if that insert was not refused.
      if (job.stored && !(await job.stored)) return;
      const { delivery } = job;
      // Queued long enough that the claim could run out mid-attempt: extend it, or let it go.
      if (
        delivery.due_at !== undefined &&
        delivery.lease &&
        delivery.due_at - Date.now() < this.sender.longestAttemptMs + LEASE_MARGIN_MS / 2
      ) {
        const renewed = await this.deliveries.update(
          ALL_TENANTS,
          { id: delivery.id, lease: delivery.lease },
          { $set: { due_at: Date.now() + this.leaseMs() } },
        );
        if (!renewed) return;
        job.delivery = renewed;
      }
      const target =
        job.target !== undefined
          ? job.target
          : await this.broker.call<Target | null, object>("webhooks.target", { org_id: delivery.org_id, id: delivery.webhook_id });
      if (!target) {
        this.sender.drop(delivery.webhook_id);
        return this.settle(job, null, "failed");
      }
      job.target = target;
      this.lanes.setRate(target.id, target.rate_limit);
      if (target.status !== "enabled") {
        this.sender.drop(target.id);
        const at = new Date().toISOString();
        return this.settle(
          job,
          { number: delivery.attempts.length + 1, at, status_code: null, duration_ms: 0, error: "not sent: the webhook is disabled" },
          "failed",
        );
      }
      // A test delivery carries its own body (its event is not in the event log).
      let payload = job.payload ?? (delivery.payload as EventPayload | undefined);
      if (!payload) {
        const event = await this.events.get({ org_id: delivery.org_id, environment: delivery.environment }, delivery.event_id);
        if (!event) {
          // Gone with retention (a redelivery of a delivery that outlived its event).
          const at = new Date().toISOString();
          const gone = "not sent: the event is no longer stored (events are kept EVENT_RETENTION_DAYS days)";
          return this.settle(job, { number: delivery.attempts.length + 1, at, status_code: null, duration_ms: 0, error: gone }, "failed");
        }
        payload = payloadOf(event);
      }
      const body = JSON.stringify(payload);
      const at = new Date().toISOString();
      const headers = deliveryHeaders(delivery, body, target.secrets);
      if (delivery.traceparent) headers.traceparent = childTraceparent(delivery.traceparent);
      const { response, ...result } = await this.sender.post(target.id, target.url, body, headers);
      // What was sent and answered, for the log (capture.ts); the summary only past DETAILED_ATTEMPTS_MAX.
      const detail = job.delivery.attempts.length < DETAILED_ATTEMPTS_MAX && {
        request: requestOf(target.url, headers, body),
        ...(response && { response }),
      };
      // The lane's slot (a connection of the webhook's pool) is free once answered: the next attempt
      // goes out while this outcome is written, so the store's latency never idles connections.
      const settling = this.report(job, this.settle(job, { number: job.delivery.attempts.length + 1, at, ...result, ...detail }));
      this.settling.add(settling);
      void settling.then(() => this.settling.delete(settling));
    },
    report(job, work) {
      return work.then(
        () => this.failures.ok("delivery attempts"),
        (err: unknown) => {
          // Once per kind of failure, not per delivery; each delivery at debug level.
          this.failures.failed("delivery attempts", err, "each delivery falls due again when its claim runs out");
          this.logger.debug(`delivery ${job.delivery.id}: attempt failed to run; it falls due again`, err);
        },
      );
    },

    async settle(job, attempt, forced) {
      const { target } = job;
      const now = Date.now();
      let delivery = job.delivery;
      const outcome = forced ? { status: forced, dueAt: null } : outcomeOf(delivery, attempt as Attempt, this.delays, now);
      // Counted once stored, in the delivery's creation hour; a forced settle sent nothing.
      const counts: Record<string, number> = {};
      if (attempt && !forced) counts[outcome.status === "succeeded" ? "attempts_succeeded" : "attempts_failed"] = 1;
      if (outcome.dueAt === null) counts[outcome.status] = 1;
      const manual = delivery.manual === true && attempt !== null && !forced;
      // A retry of a delivery started by hand also waits for the webhook's next slot for such sends.
      if (manual && outcome.dueAt !== null) {
        outcome.dueAt = Math.max(outcome.dueAt, await this.manualSlot(delivery.org_id, delivery.webhook_id));
      }
      if (job.fresh && !job.stored) {
        // Not stored yet: its one write, already settled.
        const doc = settledDelivery(delivery, outcome, attempt, now);
        let refused: unknown;
        job.stored = this.deliveries.insert(doc).then(
          () => true,
          (err: unknown) => ((refused = err), false),
        );
        if (!(await job.stored)) {
          this.written(job, isDuplicate(refused) ? "duplicate" : "failed");
          if (!isDuplicate(refused)) throw refused;
          this.duplicates += 1;
          this.logger.warn(
            `delivery ${delivery.id}: sent by this node and also stored by another (${this.duplicates} such repeats since start)`,
          );
          return;
        }
        this.written(job, "ok");
        counts.created = 1;
        delivery = doc;
      } else {
        if (job.stored && !(await job.stored)) {
          // Its claimed row was refused while the attempt ran: another node stored and sends it.
          this.duplicates += 1;
          this.logger.warn(`delivery ${delivery.id}: sent by this node and also by another (${this.duplicates} such repeats since start)`);
          return;
        }
        // Started by hand: the attempt counts toward the webhook's streak before it is recorded, so
        // whoever waits for the record (a recovery's next batch) sees its effect.
        if (manual) await this.recordStreak(delivery, outcome.status === "succeeded");
        const updated = await this.deliveries.update(
          ALL_TENANTS,
          { id: delivery.id, lease: delivery.lease },
          settlement(outcome, attempt, now),
        );
        if (!updated) {
          this.logger.warn(`delivery ${delivery.id}: the claim ran out before the attempt was recorded; another node retries it`);
          return;
        }
      }
      this.tally.add(webhookRowsOf(delivery), counts);
      if (attempt && !forced) this.attempted(delivery, attempt, outcome.dueAt);
      if (outcome.dueAt === null) this.metrics.increment("deliveries", { outcome: outcome.status });
      if (outcome.dueAt !== null) {
        const wait = outcome.dueAt - now;
        if (wait <= LOCAL_TIMER_MAX_MS) {
          this.later(
            () =>
              this.claim(delivery.id).catch((err: unknown) =>
                this.failures.failed("claiming deliveries", err, "the poll claims them once the store answers"),
              ),
            wait,
          );
        }
        return;
      }
      // Only deliveries that ran their course move the webhook's failure streak (one started by
      // hand did with each attempt).
      const streak = !manual && !forced && target && (outcome.status === "failed" || target.consecutive_failures > 0);
      if (streak) await this.recordStreak(delivery, outcome.status === "succeeded");
    },

    recordStreak(delivery, ok) {
      return this.broker.call("webhooks.recordOutcome", { org_id: delivery.org_id, id: delivery.webhook_id, ok }).then(
        () => this.failures.ok("recording outcomes on webhooks"),
        (err: unknown) => this.failures.failed("recording outcomes on webhooks", err, `e.g. delivery ${delivery.id}'s`),
      );
    },

    attempted(delivery, attempt, dueAt) {
      const ok = attempt.error === null;
      const rows = attemptRowsOf(delivery, Date.parse(attempt.at));
      this.tally.add([rows.hour], { [ok ? "tried_succeeded" : "tried_failed"]: 1 });
      this.tally.note(rows.latest, attempt.at, attempt.status_code, ok);
      this.metrics.increment("attempts", { outcome: ok ? "succeeded" : "failed" });
      if (ok) return;
      this.logger.warn(
        {
          delivery_id: delivery.id,
          webhook_id: delivery.webhook_id,
          event_id: delivery.event_id,
          status_code: attempt.status_code,
          error: attempt.error,
          attempt: attempt.number,
          next_attempt_at: dueAt === null ? null : new Date(dueAt).toISOString(),
          request_id: delivery.request_id ?? null,
        },
        "delivery attempt failed",
      );
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const AttemptsMixin = AttemptsSchema as Partial<ServiceSchema>;
