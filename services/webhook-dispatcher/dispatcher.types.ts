import type { Attempt, DeliveryDoc } from "../../shared/records/deliveries";
import type { EventConsumer } from "../../shared/runtime/event-consumer";
import type { EventDoc, EventPayload } from "../../shared/records/events";
import type { FailureLog } from "../../shared/runtime/failure-log";
import type { Metrics } from "../../shared/runtime/metrics";
import type { Tally, WebhookOutcomeRow } from "../../shared/records/outcomes";
import type { Pruner, PruneControl } from "../../shared/records/retention";
import { DELIVERIES, RECOVERIES } from "../../shared/records/deliveries";
import { EVENTS } from "../../shared/records/events";
import { LISTENER_SESSIONS } from "../../shared/records/listeners";
import { WEBHOOK_OUTCOMES } from "../../shared/records/outcomes";
import { declareStore, type StoreVars } from "../../shared/runtime/store.mixin";
import type { Tenant } from "../../shared/storage/types";
import type { Lanes } from "./lanes";
import type { Sender } from "./sender";
import { THROTTLES, type SharedThrottle } from "./throttle";

/**
 * What the dispatcher's schema and its mixins share: the store declaration, the vars set in
 * `created`, the methods each mixin gives, and the jobs they pass around. The dispatcher's work is
 * split by concern: fan-out (fan-out.mixin.ts), attempts and their outcomes (attempts.mixin.ts),
 * claims and polls (claims.mixin.ts), the backlog gauges and pruning (upkeep.mixin.ts), the
 * delivery log's actions (delivery-actions.mixin.ts, recovery.mixin.ts, listener-attempts.mixin.ts).
 */

/** A webhook as the webhooks service hands it out (see its `subscribers` action). */
export interface Target {
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
export interface Job {
  delivery: DeliveryDoc;
  payload?: EventPayload;
  target?: Target | null;
  /** While the delivery has no row yet: the fan-out that waits for it (its event stays marked until then). */
  fresh?: FanOut;
  /** The delivery's first write once asked for (the settled row, or a claimed one); false if refused or failed. */
  stored?: Promise<boolean>;
}

/** One fan-out's deliveries not stored yet; its events' markers are unset once all are. */
export interface FanOut {
  left: number;
  incomplete: Set<string>;
  jobs: Job[];
  done: () => void;
  timer?: NodeJS.Timeout;
}

/** Concurrent attempts per webhook, and in all, on one dispatcher node. */
export const PER_WEBHOOK = 32;
export const TOTAL = 1024;
/** A claim outlives the attempt's time-out by this much before another node may take the delivery. */
export const LEASE_MARGIN_MS = 2000;
/** How often each node looks for due deliveries and for events nobody has fanned out. */
export const POLL_MS = 500;
/** After failed polls (the store failing), the next waits 1 s, 2 s, 4 s, … at most this long. */
export const POLL_BACKOFF_MAX_MS = 5_000;
/** Retries due within this long are also woken by a local timer, not only by the poll. */
export const LOCAL_TIMER_MAX_MS = 60_000;
/**
 * A first attempt not done this long after its event was stored (woken) or swept gets a claimed
 * row meanwhile (the two-write path), well before the event log's sweeps (2 s) could take the event
 * on another node; and a slow receiver never holds a sweep's batch longer than this.
 */
export const FAST_MS = 1000;
/** The dispatcher nodes seen must have stayed the same this long before swept events are split among them. */
export const VIEW_SETTLE_MS = 300;

/** The delivery log and its counts are the dispatcher's; the event log is read here, its markers unset by the events service. */
export const STORE = declareStore({
  owns: {
    deliveries: DELIVERIES,
    outcomes: WEBHOOK_OUTCOMES,
    throttles: THROTTLES,
    recoveries: RECOVERIES,
    listenerSessions: LISTENER_SESSIONS,
  },
  reads: { events: EVENTS },
});

export interface DispatcherVars extends StoreVars<typeof STORE> {
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

export interface DispatcherMethods {
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
  /** The webhook's next start time for sends started by hand (see MANUAL_PER_SECOND). */
  manualSlot(orgId: string, webhookId: string): Promise<number>;
  /** Claims the delivery at `at` (epoch ms): now, or by a local timer; else a poll finds it due. */
  claimAt(id: string, at: number): void;
  /** A delivery's success or failure told to the webhooks service, for the webhook's failure streak. */
  recordStreak(delivery: DeliveryDoc, ok: boolean): Promise<void>;
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
