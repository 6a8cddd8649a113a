import type { Context, ServiceSchema } from "moleculer";
import { EventConsumer } from "../../shared/runtime/event-consumer";
import { EVENT_STORED, unmarkThrough, type EventDoc } from "../../shared/records/events";
import { FailureLog } from "../../shared/runtime/failure-log";
import { GAUGE_INTERVAL_MS, Metrics } from "../../shared/runtime/metrics";
import { Tally } from "../../shared/records/outcomes";
import { DAY_MS, pruneAction, Pruner } from "../../shared/records/retention";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { StoreMixin } from "../../shared/runtime/store.mixin";
import { ALL_TENANTS } from "../../shared/storage/types";
import { ownerOf } from "./dispatcher.logic";
import {
  PER_WEBHOOK,
  POLL_MS,
  STORE,
  TOTAL,
  VIEW_SETTLE_MS,
  type DispatcherMethods,
  type DispatcherVars,
  type Job,
} from "./dispatcher.types";
import { AttemptsMixin } from "./attempts.mixin";
import { ClaimsMixin } from "./claims.mixin";
import { DeliveryActionsMixin } from "./delivery-actions.mixin";
import { FanOutMixin } from "./fan-out.mixin";
import { Lanes } from "./lanes";
import { ListenerAttemptsMixin } from "./listener-attempts.mixin";
import { RecoveryMixin } from "./recovery.mixin";
import { Sender } from "./sender";
import { SharedThrottle } from "./throttle";
import { UpkeepMixin } from "./upkeep.mixin";

/**
 * Sends webhook deliveries. For each stored event it creates one delivery per subscribed, enabled
 * webhook of the event's environment and POSTs it, signed; the schedule and every attempt live in
 * the store (see shared/records/deliveries.ts), so any number of dispatcher nodes share the work and a node
 * killed mid-way loses nothing.
 */
const DispatcherService: ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars> = {
  name: "webhook-dispatcher",
  // One mixin per concern (see dispatcher.types.ts).
  mixins: [
    StoreMixin(STORE),
    FanOutMixin,
    AttemptsMixin,
    ClaimsMixin,
    UpkeepMixin,
    DeliveryActionsMixin,
    RecoveryMixin,
    ListenerAttemptsMixin,
  ],

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
    /** Internal (operators, tests): a retention pass now, or as of `now`. */
    prune: pruneAction,
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
