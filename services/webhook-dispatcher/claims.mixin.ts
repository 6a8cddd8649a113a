import { randomUUID } from "node:crypto";
import type { ServiceSchema } from "moleculer";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { ALL_TENANTS } from "../../shared/storage/types";
import {
  POLL_BACKOFF_MAX_MS,
  POLL_MS,
  TOTAL,
  type DispatcherMethods,
  type DispatcherVars,
  type Job,
  type Target,
} from "./dispatcher.types";

/**
 * Claims: a due delivery is taken by one compare-and-set (see shared/records/deliveries.ts) and
 * queued in its webhook's lane; the poll claims what is due and sweeps events nobody fanned out.
 */
const ClaimsSchema: Partial<ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars>> = {
  methods: {
    /** Claims one due delivery (that one, or the most overdue) and queues its attempt. */
    async claim(id) {
      if (this.stopping) return false;
      const now = Date.now();
      // The most overdue first, read in order from the `due_at` index: a claim costs one row.
      const claimed = await this.deliveries.update(
        ALL_TENANTS,
        { ...(id && { id }), status: "pending", due_at: { $lte: now } },
        { $set: { due_at: now + this.leaseMs(), lease: randomUUID() } },
        { sort: { due_at: 1 } },
      );
      if (!claimed) return false;
      const job: Job = { delivery: claimed };
      const key = claimed.webhook_id;
      // The webhook's rate must be known before its deliveries are queued (it decides when they start).
      if (!this.lanes.knows(key)) {
        job.target = await this.broker.call<Target | null, object>("webhooks.target", { org_id: claimed.org_id, id: key });
        this.lanes.setRate(key, job.target?.rate_limit ?? null);
      }
      if (this.lanes.room(key) > 0) this.lanes.push(key, job);
      else {
        // A throttled webhook's surplus goes back to the store, due at its turn.
        await this.deliveries.update(
          ALL_TENANTS,
          { id: claimed.id, lease: claimed.lease ?? "" },
          { $set: { due_at: this.lanes.nextSlot(key) } },
        );
      }
      return true;
    },

    pollSoon() {
      if (this.polling) this.pollAgain = true;
      else void this.poll();
    },

    /** Due deliveries nobody is sending, and stored events nobody has fanned out. */
    async poll() {
      this.refreshPeers();
      if (this.polling || this.stopping || Date.now() < this.pollAfter) return;
      this.polling = true;
      this.pollAgain = false;
      try {
        while (this.lanes.size < TOTAL && (await this.claim())) {
          // claimed one; look for the next
        }
        // A backlog (events stored while no dispatcher ran) is swept batch after batch, as fast as
        // the lanes drain.
        await this.consumer.sweep(async () => {
          while (this.lanes.size > TOTAL && !this.stopping) await new Promise((r) => setTimeout(r, 20));
        });
        this.pollFailures = 0;
        this.failures.ok("claiming deliveries");
      } catch (err) {
        // Not every 500 ms against a failing store: 1 s, 2 s, 4 s, then every 5 s until it answers.
        this.pollFailures += 1;
        this.pollAfter = Date.now() + Math.min(POLL_BACKOFF_MAX_MS, POLL_MS * 2 ** this.pollFailures);
        this.failures.failed("claiming deliveries", err, "polls back off until the store answers");
      } finally {
        this.polling = false;
        if (this.pollAgain) setImmediate(() => this.pollSoon());
      }
    },

    later(fn, ms) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        fn();
      }, ms);
      timer.unref();
      this.timers.add(timer);
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const ClaimsMixin = ClaimsSchema as Partial<ServiceSchema>;
