import { randomUUID } from "node:crypto";
import type { Context, ServiceSchema } from "moleculer";
import { DELIVERIES, RECOVERIES, type Attempt, type DeliveryDoc } from "../../shared/records/deliveries";
import { ApiError, isDuplicate } from "../../shared/errors";
import { EventConsumer } from "../../shared/runtime/event-consumer";
import { EVENT_STORED, EVENTS, payloadOf, unmarkThrough, type EventDoc, type EventPayload } from "../../shared/records/events";
import { FailureLog } from "../../shared/runtime/failure-log";
import { GAUGE_COUNT_CAP, GAUGE_INTERVAL_MS, Metrics } from "../../shared/runtime/metrics";
import { attemptRowsOf, Tally, WEBHOOK_OUTCOMES, webhookRowsOf, type WebhookOutcomeRow } from "../../shared/records/outcomes";
import { childTraceparent } from "../../shared/runtime/trace";
import { DAY_MS, firstIdAt, prune, pruneAction, Pruner, retentionCutoff, type PruneControl } from "../../shared/records/retention";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { deliveryHeaders } from "../../shared/net/signing";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { ALL_TENANTS, type Tenant } from "../../shared/storage/types";
import { claimedDelivery, freshDelivery, outcomeOf, ownerOf, settledDelivery, settlement, subscribes } from "./dispatcher.logic";
import { DETAILED_ATTEMPTS_MAX, requestOf } from "./capture";
import { DeliveryActionsMixin } from "./delivery-actions.mixin";
import { forgetParams, redeliverParams, type ForgetParams, type RedeliverParams } from "./dispatcher.params";
import { Lanes } from "./lanes";
import { ListenerAttemptsMixin } from "./listener-attempts.mixin";
import { Sender } from "./sender";
import { SharedThrottle, THROTTLES } from "./throttle";

/** A webhook as the webhooks service hands it out (see its `subscribers` action). */
interface Target {
  id: string;
  url: string;
  events: string[];
  status: "enabled" | "disabled";
  secrets: string[];
  consecutive_failures: number;
  rate_limit: number | null;
}

/**
 * One attempt to make: the delivery (claimed by this node, or not stored yet), and what is already
 * known of its event and webhook.
 */
interface Job {
  delivery: DeliveryDoc;
  payload?: EventPayload;
  target?: Target | null;
  /** While the delivery has no row yet: the fan-out that waits for it (its event stays marked until then). */
  fresh?: FanOut;
  /** The delivery's first write once asked for (the settled row, or a claimed one); false if refused or failed. */
  stored?: Promise<boolean>;
}

/** One fan-out's deliveries not stored yet; its events' markers are unset once all are. */
interface FanOut {
  left: number;
  incomplete: Set<string>;
  jobs: Job[];
  done: () => void;
  timer?: NodeJS.Timeout;
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
/**
 * A first attempt not done this long after its event was stored (woken) or swept gets a claimed
 * row meanwhile (the two-write path), well before the event log's sweeps (2 s) could take the event
 * on another node; and a slow receiver never holds a sweep's batch longer than this.
 */
const FAST_MS = 1000;
/** The dispatcher nodes seen must have stayed the same this long before swept events are split among them. */
const VIEW_SETTLE_MS = 300;

/** The delivery log and its counts are the dispatcher's; the event log is read here, its markers unset by the events service. */
const STORE = declareStore({
  owns: { deliveries: DELIVERIES, outcomes: WEBHOOK_OUTCOMES, throttles: THROTTLES, recoveries: RECOVERIES },
  reads: { events: EVENTS },
});

interface DispatcherVars extends StoreVars<typeof STORE> {
  sender: Sender;
  lanes: Lanes<Job>;
  /** Throttled webhooks' start times, shared by all dispatcher nodes. */
  throttle: SharedThrottle;
  timeoutMs: number;
  delays: number[];
  consumer: EventConsumer;
  polling: boolean;
  /** A poll was asked for while one ran: it runs again once done (see pollSoon). */
  pollAgain: boolean;
  stopping: boolean;
  timers: Set<NodeJS.Timeout>;
  poller: NodeJS.Timeout | undefined;
  /** Failures of the background work, logged once per kind (a full disk fails every delivery at once). */
  failures: FailureLog;
  /** Polls in a row that failed, and when the next may run. */
  pollFailures: number;
  pollAfter: number;
  pruner: Pruner;
  /** Delivery outcomes counted per webhook, hour and day (see shared/records/outcomes.ts). */
  tally: Tally<WebhookOutcomeRow>;
  /** Fan-outs with deliveries not stored yet. */
  fanOuts: Set<FanOut>;
  /** The dispatcher nodes seen (sorted ids, this one included), since when, and as one string. */
  peers: string[];
  peersKey: string;
  peersSince: number;
  /** First attempts found made twice (another node stored the delivery first); see `stored`. */
  duplicates: number;
  /** Attempts made whose outcome is still being written (see `attempt`). */
  settling: Set<Promise<void>>;
  metrics: Metrics;
  gauges: NodeJS.Timeout | undefined;
}
interface DispatcherMethods {
  leaseMs(): number;
  /** Creates one tenant's events' deliveries and queues their first attempts; answers the events not done. */
  fanOut(tenant: Required<Tenant>, events: EventDoc[]): Promise<Set<string>>;
  /** Stores a fresh job's delivery claimed by this node (its first attempt is late); idempotent. */
  storeClaimed(job: Job): void;
  /** A fresh job's delivery is stored, refused as already there, or could not be written (or sent). */
  written(job: Job, result: "ok" | "duplicate" | "failed"): void;
  /** Rereads the dispatcher nodes; on a change, every delivery not stored yet gets its claimed row. */
  refreshPeers(): void;
  /** Makes the attempt; resolves once its request is answered (its outcome is written after: see `settling`). */
  attempt(job: Job): Promise<void>;
  /** Logs a failure of an attempt or of writing its outcome (once per kind; each delivery at debug level). */
  report(job: Job, work: Promise<void>): Promise<void>;
  settle(job: Job, attempt: Attempt | null, forced?: "failed"): Promise<void>;
  claim(id?: string): Promise<boolean>;
  poll(): Promise<void>;
  /** Polls now, or right after the poll under way. */
  pollSoon(): void;
  later(fn: () => void, ms: number): void;
  /** An attempt recorded (stored): its counts, the webhook's last attempt, the metrics and, when it failed, a warn line. */
  attempted(delivery: DeliveryDoc, attempt: Attempt, dueAt: number | null): void;
  /** The backlog gauges, from the `due_at` index: bounded reads. */
  measureBacklog(): Promise<void>;
  /** Deletes the settled deliveries created more than EVENT_RETENTION_DAYS before `now`. */
  pruneDeliveries(now: number, control: PruneControl): Promise<number>;
}

/**
 * Sends webhook deliveries. For each stored event it creates one delivery per subscribed, enabled
 * webhook of the event's environment and POSTs it, signed; the schedule and every attempt live in
 * the store (see shared/records/deliveries.ts), so any number of dispatcher nodes share the work and a node
 * killed mid-way loses nothing.
 */
const DispatcherService: ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars> = {
  name: "webhook-dispatcher",
  // The CLI's listener sessions' part of the delivery log (listener-attempts.ts).
  // Retry-now, test events and recovery jobs (delivery-actions.ts).
  mixins: [StoreMixin(STORE), ListenerAttemptsMixin, DeliveryActionsMixin],

  events: {
    /** Dispatcher nodes come and go: swept events are split among those seen (see fanOut). */
    "$services.changed"() {
      this.refreshPeers();
    },
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
        this.sender.drop(ctx.params.webhook_id);
        await this.throttle.forget(ctx.params.org_id, ctx.params.webhook_id);
        const removed = await this.deliveries.deleteMany(tenant, { webhook_id: ctx.params.webhook_id });
        await this.outcomes.deleteMany(tenant, { webhook_id: ctx.params.webhook_id });
        return removed;
      },
    },

    /** Internal (operators, tests): a retention pass now, or as of `now`. */
    prune: pruneAction,
  },

  methods: {
    leaseMs() {
      return this.sender.longestAttemptMs + LEASE_MARGIN_MS;
    },

    /**
     * One write per delivery: the first attempt is made before the delivery's row exists, and the
     * row is inserted once, already settled (or scheduled for its retry), under an id derived from
     * the event and the webhook. The event keeps its marker until every row is written, so a node
     * killed between attempt and write leaves the event to a sweep, which sends it again under the
     * same id (at least once); a repeated fan-out's insert is refused as a duplicate.
     *
     * Which events a node sends first-then-stores: those just stored (their wake-up came here, and
     * sweeps leave events alone for 2 s), and swept ones that fall to it among the dispatcher nodes
     * it sees (see `ownerOf`), once that view has settled; others stay marked for their node. A
     * first attempt still unfinished after FAST_MS, or when the view changes, gets a claimed row
     * meanwhile, so no other node's sweep finds its event without a delivery.
     */
    async fanOut(tenant, events) {
      const incomplete = new Set<string>();
      const now = Date.now();
      const me = this.broker.nodeID;
      const settled = !this.broker.transit || now - this.peersSince >= VIEW_SETTLE_MS;
      const taken: EventDoc[] = [];
      const swept: string[] = [];
      let start = now;
      for (const event of events) {
        const since = event.undispatched_since ?? 0;
        if (now - since < FAST_MS) {
          taken.push(event);
          if (since < start) start = since;
        } else if (settled && ownerOf(event.id, this.peers) === me) {
          taken.push(event);
          swept.push(event.id);
        } else {
          incomplete.add(event.id);
        }
      }
      if (taken.length === 0) return incomplete;
      const targets = await this.broker.call<Target[], object>("webhooks.subscribers", tenant);
      // A swept event may have deliveries stored already (a claimed row of a slow first attempt, or
      // a node that died before unsetting the marker): those are not sent again from here.
      const stored = new Set<string>();
      if (swept.length > 0 && targets.length > 0) {
        for (const d of await this.deliveries.find(tenant, { event_id: { $in: swept } })) stored.add(`${d.event_id}\n${d.webhook_id}`);
      }
      for (const target of targets) this.lanes.setRate(target.id, target.rate_limit);
      const at = new Date(now).toISOString();
      const fanOut: FanOut = { left: 0, incomplete, jobs: [], done: () => undefined };
      const queuing = new Map<string, number>();
      const deferred: Promise<void>[] = [];
      for (const event of taken) {
        const payload = payloadOf(event);
        for (const target of targets) {
          if (!subscribes(target.events, event.type)) continue;
          if (stored.size > 0 && stored.has(`${event.id}\n${target.id}`)) continue;
          // What a throttled webhook cannot send soon waits in the store, due at its turn (its claim
          // runs out then, and any node's poll takes it).
          const ahead = queuing.get(target.id) ?? 0;
          if (ahead >= this.lanes.room(target.id)) {
            const delivery = claimedDelivery(tenant, event, target.id, at, {
              dueAt: this.lanes.nextSlot(target.id, now, ahead),
              lease: randomUUID(),
            });
            deferred.push(
              this.deliveries.insert(delivery).then(
                () => this.tally.add(webhookRowsOf(delivery), { created: 1 }),
                (err: unknown) => {
                  // Refused as a duplicate: stored already (a sweep racing a wake-up); else the sweep retries.
                  if (!isDuplicate(err)) incomplete.add(event.id);
                },
              ),
            );
            continue;
          }
          queuing.set(target.id, ahead + 1);
          fanOut.jobs.push({ delivery: freshDelivery(tenant, event, target.id, at), payload, target, fresh: fanOut });
        }
      }
      fanOut.left = fanOut.jobs.length;
      if (fanOut.left === 0) {
        await Promise.all(deferred);
        return incomplete;
      }
      const written = new Promise<void>((resolve) => (fanOut.done = resolve));
      fanOut.timer = setTimeout(
        () => {
          for (const job of fanOut.jobs) this.storeClaimed(job);
        },
        Math.max(0, start + FAST_MS - now),
      );
      this.fanOuts.add(fanOut);
      for (const job of fanOut.jobs) this.lanes.push(job.delivery.webhook_id, job, job.target?.rate_limit ?? null);
      await Promise.all([written, ...deferred]);
      return incomplete;
    },

    storeClaimed(job) {
      if (!job.fresh || job.stored) return;
      const delivery = { ...job.delivery, due_at: Date.now() + this.leaseMs(), lease: randomUUID() };
      job.delivery = delivery;
      job.stored = this.deliveries.insert(delivery).then(
        () => {
          this.tally.add(webhookRowsOf(delivery), { created: 1 });
          this.written(job, "ok");
          return true;
        },
        (err: unknown) => {
          // Refused: another node stored it first and sends it. Else the event stays marked for a sweep.
          this.written(job, isDuplicate(err) ? "duplicate" : "failed");
          if (!isDuplicate(err)) this.failures.failed("storing deliveries", err, "their events stay marked and are swept again");
          return false;
        },
      );
    },

    written(job, result) {
      const fanOut = job.fresh;
      if (!fanOut) return;
      job.fresh = undefined;
      if (result === "failed") fanOut.incomplete.add(job.delivery.event_id);
      fanOut.left -= 1;
      if (fanOut.left > 0) return;
      clearTimeout(fanOut.timer);
      this.fanOuts.delete(fanOut);
      fanOut.jobs = [];
      fanOut.done();
    },

    refreshPeers() {
      const me = this.broker.nodeID;
      const nodes = new Set([me]);
      for (const s of this.broker.registry.getServiceList({ onlyAvailable: true }))
        if (s.name === "webhook-dispatcher" && s.nodeID) nodes.add(s.nodeID);
      const peers = [...nodes].sort();
      const key = peers.join("\n");
      if (key === this.peersKey) return;
      this.peers = peers;
      this.peersKey = key;
      this.peersSince = Date.now();
      for (const fanOut of this.fanOuts) for (const job of fanOut.jobs) this.storeClaimed(job);
      // Sweeps stop while the view settles: the next starts as soon as it has, not a poll later.
      this.later(() => this.pollSoon(), VIEW_SETTLE_MS);
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
      // Only deliveries that ran their course move the webhook's failure streak.
      const streak = !forced && target && (outcome.status === "failed" || target.consecutive_failures > 0);
      if (streak) {
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

    async measureBacklog() {
      const now = Date.now();
      const [due, next] = await Promise.all([
        this.deliveries.count(ALL_TENANTS, { due_at: { $lte: now } }, { limit: GAUGE_COUNT_CAP }),
        this.deliveries.find(ALL_TENANTS, { due_at: { $exists: true } }, { sort: { due_at: 1 }, limit: 100 }),
      ]);
      const oldest = next.reduce((min, d) => Math.min(min, Date.parse(d.created_at)), now);
      this.metrics.set("due", due);
      this.metrics.set("queued", this.lanes.size);
      this.metrics.set("oldestPending", (now - oldest) / 1000);
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
    this.timeoutMs = settings.webhookTimeoutMs;
    this.delays = settings.webhookRetryDelaysMs;
    this.sender = new Sender(settings.webhookTimeoutMs, settings.webhookAllowPrivateTargets, PER_WEBHOOK, TOTAL);
    this.throttle = new SharedThrottle(this.throttles);
    this.lanes = new Lanes<Job>(
      PER_WEBHOOK,
      TOTAL,
      (job) => this.report(job, this.attempt(job)),
      (key, job, rate) => this.throttle.reserve(job.delivery.org_id, key, rate),
    );
    this.consumer = new EventConsumer(
      this.events,
      "undispatched_since",
      (tenant, events) => this.fanOut(tenant, events),
      this.logger,
      unmarkThrough(this.broker),
      () => {
        // What fanOut takes of swept events: its share once the view of dispatcher nodes settled;
        // before, none, and the sweep stops (refreshPeers polls again the moment the view settles).
        if (this.broker.transit && Date.now() - this.peersSince < VIEW_SETTLE_MS) return false;
        if (this.peers.length === 1) return null;
        const me = this.broker.nodeID;
        const peers = this.peers;
        return (id) => ownerOf(id, peers) === me;
      },
    );
    this.tally = new Tally(this.outcomes, (message, err) => this.logger.warn(message, err), settings.usageRetentionDays * DAY_MS);
    this.polling = false;
    this.pollAgain = false;
    this.stopping = false;
    this.timers = new Set();
    this.failures = new FailureLog(this.logger);
    this.pollFailures = 0;
    this.pollAfter = 0;
    this.fanOuts = new Set();
    this.peers = [this.broker.nodeID];
    this.peersKey = this.broker.nodeID;
    this.peersSince = Date.now();
    this.duplicates = 0;
    this.settling = new Set();
    this.pruner = new Pruner("webhook deliveries", (now, control) => this.pruneDeliveries(now, control), this.logger);
    this.metrics = new Metrics(this.broker, ["deliveries", "attempts", "due", "queued", "oldestPending"]);
  },

  started() {
    this.poller = setInterval(() => void this.poll(), POLL_MS);
    this.poller.unref();
    void this.poll();
    // Its first sweep, once its view of the dispatcher nodes has settled.
    this.later(() => this.pollSoon(), VIEW_SETTLE_MS);
    this.pruner.start();
    if (this.metrics.enabled) {
      const measure = () =>
        void this.measureBacklog().catch((err: unknown) =>
          this.failures.failed("measuring the backlog", err, "the gauges keep their last values"),
        );
      this.gauges = setInterval(measure, GAUGE_INTERVAL_MS);
      this.gauges.unref();
      measure();
    }
  },

  /** Finishes the attempts in flight; hands queued ones back to the store for other nodes. */
  async stopped() {
    if (this.stopping) return;
    this.stopping = true;
    this.consumer.stop();
    clearInterval(this.poller);
    clearInterval(this.gauges);
    const pruning = this.pruner.stop();
    for (const timer of this.timers) clearTimeout(timer);
    const queued = this.lanes.takeQueued();
    await Promise.all(
      queued.map(async (job) => {
        // Not stored yet: its event stays marked and is swept again.
        if (job.fresh && !job.stored) return this.written(job, "failed");
        if (job.stored && !(await job.stored)) return;
        await this.deliveries
          .update(
            ALL_TENANTS,
            { id: job.delivery.id, lease: job.delivery.lease ?? null },
            { $set: { due_at: Date.now() }, $unset: { lease: true } },
          )
          .catch(() => null);
      }),
    );
    await this.lanes.idle();
    await Promise.all(this.settling);
    await this.tally.flush();
    await this.sender.close();
    await pruning;
  },
};

export default DispatcherService;
