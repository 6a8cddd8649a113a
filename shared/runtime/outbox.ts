import type { ServiceBroker } from "moleculer";
import { publishedEvent, publishEvents, type NewEvent, type PublishedEvent } from "../records/events";
import { FailureLog } from "./failure-log";
import {
  ALL_TENANTS,
  collectionSpec,
  type AtomicWrite,
  type Collection,
  type Doc,
  type Environment,
  type OwnStore,
} from "../storage/types";

/** An event waiting in its service's outbox to be handed to the events service; `at`: when it was written (ms). */
export interface OutboxRow extends Doc {
  environment: Environment;
  event: PublishedEvent;
  at: number;
}

/** A service's outbox: `<service>_outbox`, owned by that service, read oldest first by the relay. */
export const outboxSpec = (service: string) =>
  collectionSpec<OutboxRow>(`${service.toLowerCase().replace(/[^a-z0-9_]/g, "_")}_outbox`, [{ fields: { at: 1 } }]);

/** The relay leaves rows younger than this to the request that wrote them. */
const GRACE_MS = 1000;
const RELAY_EVERY_MS = 1000;
const BATCH = 100;
/** Batches one relay pass hands over at most; the next pass goes on. */
const MAX_BATCHES = 10;

/**
 * The transactional outbox: a service stores a state change and the event that records it in one
 * atomic write to collections it owns (the change, and a row of its outbox), then hands the event
 * to the events service, which alone writes the event log, and removes the row. The events service
 * skips an event whose id it has stored already, so a row handed over twice stores one event. A
 * process that stops between the write and the hand-over (killed, or the events service out of
 * reach) leaves the row; the relay (at start and every second, on every node of the service, in
 * bounded batches along the `at` index) hands it over later. Nothing recorded is lost, nothing is
 * stored twice.
 */
export class Outbox {
  private timer: NodeJS.Timeout | undefined;
  private relaying: Promise<void> | undefined;
  private stopped = false;
  private readonly failures: FailureLog;

  constructor(
    private readonly store: OwnStore,
    private readonly rows: Collection<OutboxRow>,
    private readonly broker: ServiceBroker,
    logger: ServiceBroker["logger"],
  ) {
    this.failures = new FailureLog(logger);
  }

  /**
   * Stores `writes` and the event `input` together, or neither; then hands the event over. Answers
   * null, storing nothing, when an update among `writes` matched no document; else the documents
   * written. A failed hand-over is not the caller's failure: the change is stored, the relay goes on.
   */
  async recordWith(writes: AtomicWrite[], input: NewEvent): Promise<Doc[] | null> {
    const now = Date.now();
    const event = publishedEvent(input, now);
    const row: OutboxRow = { id: event.id, org_id: event.org_id, environment: event.environment, event, at: now };
    const written = await this.store.atomically([...writes, { op: "insert", collection: this.rows, doc: row }]);
    if (!written) return null;
    await this.handOver([row]);
    return written.slice(0, writes.length);
  }

  /**
   * Hands rows over, then removes them; answers the removal, or null when the hand-over failed. A
   * request does not wait for the removal: a row left behind is handed over again, harmlessly.
   */
  private async handOver(rows: OutboxRow[]): Promise<{ removed: Promise<void> } | null> {
    try {
      await publishEvents(
        this.broker,
        rows.map((r) => r.event),
      );
      this.failures.ok("handing events to the events service");
    } catch (err) {
      this.failures.failed("handing events to the events service", err, "the outbox relay hands them over later");
      return null;
    }
    const removed = this.rows.deleteMany(ALL_TENANTS, { id: { $in: rows.map((r) => r.id) } }).then(
      () => undefined,
      (err: unknown) => this.failures.failed("clearing the outbox", err, "its rows are handed over again (stored once)"),
    );
    return { removed };
  }

  /** One relay pass: the rows older than the grace period, oldest first, a bounded number of batches. */
  relay(): Promise<void> {
    this.relaying ??= (async () => {
      try {
        for (let n = 0; n < MAX_BATCHES && !this.stopped; n += 1) {
          const rows = await this.rows.find(ALL_TENANTS, { at: { $lt: Date.now() - GRACE_MS } }, { sort: { at: 1 }, limit: BATCH });
          if (rows.length === 0) break;
          const handed = await this.handOver(rows);
          if (!handed) break;
          await handed.removed;
          if (rows.length < BATCH) break;
        }
      } catch (err) {
        this.failures.failed("reading the outbox", err, "the next relay pass tries again");
      } finally {
        this.relaying = undefined;
      }
    })();
    return this.relaying;
  }

  start(): void {
    void this.relay();
    this.timer = setInterval(() => void this.relay(), RELAY_EVERY_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.relaying;
  }
}
