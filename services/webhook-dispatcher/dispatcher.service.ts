import { randomUUID } from "node:crypto";
import type { Context, ServiceSchema } from "moleculer";
import { deliveriesCollection, type Attempt, type DeliveryDoc } from "../../shared/deliveries";
import { ApiError, isDuplicate } from "../../shared/errors";
import { EventConsumer } from "../../shared/event-consumer";
import { EVENT_STORED, eventsCollection, payloadOf, type EventDoc, type EventPayload } from "../../shared/events";
import { FailureLog } from "../../shared/failure-log";
import { Tally, webhookOutcomesCollection, webhookRowsOf, type WebhookOutcomeRow } from "../../shared/outcomes";
import { firstIdAt, prune, Pruner, retentionCutoff, type PruneControl } from "../../shared/retention";
import type { PlatformSettings } from "../../shared/platform";
import { deliveryHeaders } from "./signing";
import { StoreMixin } from "../../shared/store-mixin";
import { ALL_TENANTS, type Collection, type Store, type Tenant } from "../../shared/storage/types";
import { claimedDelivery, outcomeOf, settlement, subscribes, type Claimed } from "./dispatcher.logic";
import { forgetParams, redeliverParams, type ForgetParams, type RedeliverParams } from "./dispatcher.params";
import { Lanes } from "./lanes";
import { Sender } from "./sender";

/** A webhook as the webhooks service hands it out (see its `subscribers` action). */
interface Target {
  id: string;
  url: string;
  events: string[];
  status: "enabled" | "disabled";
  secrets: string[];
  consecutive_failures: number;
}

/** One attempt to make: the claimed delivery, and what is already known of its event and webhook. */
interface Job {
  delivery: Claimed;
  payload?: EventPayload;
  target?: Target | null;
}

/** Concurrent attempts per webhook, and in all, on one dispatcher node. */
const PER_WEBHOOK = 32;
const TOTAL = 1024;
/** A claim outlives the attempt's time-out by this much before another node may take the delivery. */
const LEASE_MARGIN_MS = 2000;
/** How often each node looks for due deliveries and for events nobody has fanned out. */
const POLL_MS = 500;
/** After failed polls (the store failing), the next waits 1 s, 2 s, 4 s, … at most this long. */
const POLL_BACKOFF_MAX_MS = 5_000;
/** Retries due within this long are also woken by a local timer, not only by the poll. */
const LOCAL_TIMER_MAX_MS = 60_000;

interface DispatcherVars {
  store: Store;
  deliveries: Collection<DeliveryDoc>;
  events: Collection<EventDoc>;
  sender: Sender;
  lanes: Lanes<Job>;
  timeoutMs: number;
  delays: number[];
  consumer: EventConsumer;
  polling: boolean;
  stopping: boolean;
  timers: Set<NodeJS.Timeout>;
  poller: NodeJS.Timeout | undefined;
  /** Failures of the background work, logged once per kind (a full disk fails every delivery at once). */
  failures: FailureLog;
  /** Polls in a row that failed, and when the next may run. */
  pollFailures: number;
  pollAfter: number;
  pruner: Pruner;
  /** Delivery outcomes counted per webhook, hour and day (see shared/outcomes.ts). */
  tally: Tally<WebhookOutcomeRow>;
  outcomes: Collection<WebhookOutcomeRow>;
}
interface DispatcherMethods {
  leaseMs(): number;
  /** Creates one tenant's events' deliveries and queues their first attempts; answers the events not done. */
  fanOut(tenant: Required<Tenant>, events: EventDoc[]): Promise<Set<string>>;
  attempt(job: Job): Promise<void>;
  settle(job: Job, attempt: Attempt | null, forced?: "failed"): Promise<void>;
  claim(id?: string): Promise<boolean>;
  poll(): Promise<void>;
  later(fn: () => void, ms: number): void;
  /** Deletes the settled deliveries created more than EVENT_RETENTION_DAYS before `now`. */
  pruneDeliveries(now: number, control: PruneControl): Promise<number>;
}

/**
 * Sends webhook deliveries. For each stored event it creates one delivery per subscribed, enabled
 * webhook of the event's environment and POSTs it, signed; the schedule and every attempt live in
 * the store (see shared/deliveries.ts), so any number of dispatcher nodes share the work and a node
 * killed mid-way loses nothing.
 */
const DispatcherService: ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars> = {
  name: "webhook-dispatcher",
  mixins: [StoreMixin],

  events: {
    /** Wake-up from whoever stored an event; one dispatcher node gets each. */
    [EVENT_STORED]: {
      handler(ctx: Context<{ event: EventDoc }>) {
        this.consumer.wake(ctx.params.event);
      },
    },
  },

  actions: {
    /**
     * Internal, for the webhooks service (whose API checked the webhook and the delivery): a settled
     * delivery starts a new series of attempts now, taken out of its settled count, and this node
     * claims it at once. Answers the delivery as updated; 409 if it changed meanwhile.
     */
    redeliver: {
      visibility: "public",
      params: redeliverParams,
      async handler(ctx: Context<RedeliverParams>): Promise<DeliveryDoc> {
        const { org_id, environment, id, status, series_start } = ctx.params;
        const now = Date.now();
        const at = new Date(now).toISOString();
        // From the settled status the caller read, so the right settled count is taken back below.
        const updated = await this.deliveries.update(
          { org_id, environment },
          { id, status },
          { $set: { status: "pending", series_start, due_at: now, next_attempt_at: at, updated_at: at }, $unset: { lease: true } },
        );
        if (!updated) {
          throw new ApiError("invalid_state", "The delivery changed meanwhile (it is being redelivered); read it again", {
            param: "delivery_id",
          });
        }
        // The redelivery stands if this write fails; the count is then one off, and logged.
        await Promise.all(webhookRowsOf(updated).map((row) => this.outcomes.increment(row, { [status]: -1 }))).catch((err: unknown) =>
          this.logger.warn(`delivery ${id}: redelivered, but its settled count in analytics could not be taken back`, err),
        );
        // Claimed here and now; if that fails, a poll finds it due.
        this.claim(id).catch((err: unknown) =>
          this.failures.failed("claiming deliveries", err, "the poll claims them once the store answers"),
        );
        return updated;
      },
    },

    /** Internal, for the webhooks service: a deleted webhook's delivery log and delivery counts go with it. */
    forget: {
      visibility: "public",
      params: forgetParams,
      async handler(ctx: Context<ForgetParams>): Promise<number> {
        const tenant = { org_id: ctx.params.org_id };
        const removed = await this.deliveries.deleteMany(tenant, { webhook_id: ctx.params.webhook_id });
        await this.outcomes.deleteMany(tenant, { webhook_id: ctx.params.webhook_id });
        return removed;
      },
    },

    /** Internal (operators, tests): one retention pass now, as of `now`; answers how many deliveries went. */
    prune: {
      visibility: "public",
      params: { $$strict: true, now: { type: "number", integer: true, optional: true } },
      handler(ctx: Context<{ now?: number }>): Promise<number> {
        const now = ctx.params.now;
        return now === undefined ? this.pruner.run() : this.pruneDeliveries(now, {});
      },
    },
  },

  methods: {
    leaseMs() {
      return this.timeoutMs + LEASE_MARGIN_MS;
    },

    async fanOut({ org_id, environment }, events) {
      const incomplete = new Set<string>();
      const created: Job[] = [];
      const targets = await this.broker.call<Target[], object>("webhooks.subscribers", { org_id, environment });
      const now = Date.now();
      const at = new Date(now).toISOString();
      const inserts: Promise<void>[] = [];
      for (const event of events) {
        const payload = payloadOf(event);
        for (const target of targets) {
          if (!subscribes(target.events, event.type)) continue;
          // Created already claimed by this node: the first attempt needs no separate claim.
          const delivery = claimedDelivery({ org_id, environment }, event, target.id, at, {
            dueAt: now + this.leaseMs(),
            lease: randomUUID(),
          });
          inserts.push(
            this.deliveries.insert(delivery).then(
              () => {
                created.push({ delivery, payload, target });
                this.tally.add(webhookRowsOf(delivery), { created: 1 });
              },
              (err: unknown) => {
                // A unique-index refusal means another node fanned this event out already (a
                // sweep racing a wake-up) and sends it; anything else leaves the event to the sweep.
                if (!isDuplicate(err)) incomplete.add(event.id);
              },
            ),
          );
        }
      }
      await Promise.all(inserts);
      for (const job of created) this.lanes.push(job.delivery.webhook_id, job);
      return incomplete;
    },

    async attempt(job) {
      const { delivery } = job;
      if (this.stopping) return;
      // Queued long enough that the claim could run out mid-attempt: extend it, or let it go.
      if (delivery.due_at - Date.now() < this.timeoutMs + LEASE_MARGIN_MS / 2) {
        const renewed = await this.deliveries.update(
          ALL_TENANTS,
          { id: delivery.id, lease: delivery.lease },
          { $set: { due_at: Date.now() + this.leaseMs() } },
        );
        if (!renewed) return;
        job.delivery = renewed as Claimed;
      }
      const target =
        job.target !== undefined
          ? job.target
          : await this.broker.call<Target | null, object>("webhooks.target", { org_id: delivery.org_id, id: delivery.webhook_id });
      if (!target) return this.settle(job, null, "failed");
      job.target = target;
      if (target.status !== "enabled") {
        const at = new Date().toISOString();
        return this.settle(
          job,
          { number: delivery.attempts.length + 1, at, status_code: null, duration_ms: 0, error: "not sent: the webhook is disabled" },
          "failed",
        );
      }
      let payload = job.payload;
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
      const result = await this.sender.post(target.url, body, deliveryHeaders(delivery, body, target.secrets));
      await this.settle(job, { number: job.delivery.attempts.length + 1, at, ...result });
    },

    async settle(job, attempt, forced) {
      const { delivery, target } = job;
      const now = Date.now();
      const outcome = forced ? { status: forced, dueAt: null } : outcomeOf(delivery, attempt as Attempt, this.delays, now);
      const updated = await this.deliveries.update(
        ALL_TENANTS,
        { id: delivery.id, lease: delivery.lease },
        settlement(outcome, attempt, now),
      );
      if (!updated) {
        this.logger.warn(`delivery ${delivery.id}: the claim ran out before the attempt was recorded; another node retries it`);
        return;
      }
      // Counted once stored, in the delivery's creation hour; a forced settle sent nothing.
      this.tally.add(webhookRowsOf(delivery), {
        ...(attempt && !forced && { [outcome.status === "succeeded" ? "attempts_succeeded" : "attempts_failed"]: 1 }),
        ...(outcome.dueAt === null && { [outcome.status]: 1 }),
      });
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
      // Only deliveries that ran their course move the webhook's failure streak.
      const counts = !forced && target && (outcome.status === "failed" || target.consecutive_failures > 0);
      if (counts) {
        await this.broker
          .call("webhooks.recordOutcome", { org_id: delivery.org_id, id: delivery.webhook_id, ok: outcome.status === "succeeded" })
          .then(
            () => this.failures.ok("recording outcomes on webhooks"),
            (err: unknown) => this.failures.failed("recording outcomes on webhooks", err, `e.g. delivery ${delivery.id}'s`),
          );
      }
    },

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
      this.lanes.push(claimed.webhook_id, { delivery: claimed as Claimed });
      return true;
    },

    /** Due deliveries nobody is sending, and stored events nobody has fanned out. */
    async poll() {
      if (this.polling || this.stopping || Date.now() < this.pollAfter) return;
      this.polling = true;
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

    pruneDeliveries(now, control) {
      const days = this.settings.config.eventRetentionDays;
      // By creation (ids sort by time); a pending delivery (retrying, or redelivered) stays until it settles.
      return prune(
        {
          collection: this.deliveries,
          field: "id",
          before: firstIdAt("del", retentionCutoff(days, now)),
          removable: { status: { $in: ["succeeded", "failed"] } },
        },
        control,
      );
    },
  },

  created() {
    const settings = this.settings.config;
    this.deliveries = deliveriesCollection(this.store);
    this.events = eventsCollection(this.store);
    this.timeoutMs = settings.webhookTimeoutMs;
    this.delays = settings.webhookRetryDelaysMs;
    this.sender = new Sender(settings.webhookTimeoutMs, settings.webhookAllowPrivateTargets, PER_WEBHOOK);
    this.lanes = new Lanes<Job>(PER_WEBHOOK, TOTAL, (job) =>
      this.attempt(job).then(
        () => this.failures.ok("delivery attempts"),
        (err: unknown) => {
          // Once per kind of failure, not per delivery; each delivery at debug level.
          this.failures.failed("delivery attempts", err, "each delivery falls due again when its claim runs out");
          this.logger.debug(`delivery ${job.delivery.id}: attempt failed to run; it falls due again`, err);
        },
      ),
    );
    this.consumer = new EventConsumer(this.events, "undispatched_since", (tenant, events) => this.fanOut(tenant, events), this.logger);
    this.outcomes = webhookOutcomesCollection(this.store);
    this.tally = new Tally(this.outcomes, (message, err) => this.logger.warn(message, err));
    this.polling = false;
    this.stopping = false;
    this.timers = new Set();
    this.failures = new FailureLog(this.logger);
    this.pollFailures = 0;
    this.pollAfter = 0;
    this.pruner = new Pruner("webhook deliveries", (control) => this.pruneDeliveries(Date.now(), control), this.logger);
  },

  started() {
    this.poller = setInterval(() => void this.poll(), POLL_MS);
    this.poller.unref();
    void this.poll();
    this.pruner.start();
  },

  /** Finishes the attempts in flight; hands queued ones back to the store for other nodes. */
  async stopped() {
    if (this.stopping) return;
    this.stopping = true;
    this.consumer.stop();
    clearInterval(this.poller);
    const pruning = this.pruner.stop();
    for (const timer of this.timers) clearTimeout(timer);
    const queued = this.lanes.takeQueued();
    await Promise.all(
      queued.map((job) =>
        this.deliveries
          .update(
            ALL_TENANTS,
            { id: job.delivery.id, lease: job.delivery.lease },
            { $set: { due_at: Date.now() }, $unset: { lease: true } },
          )
          .catch(() => null),
      ),
    );
    await this.lanes.idle();
    await this.tally.flush();
    await this.sender.close();
    await pruning;
  },
};

export default DispatcherService;
