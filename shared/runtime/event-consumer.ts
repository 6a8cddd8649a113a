import type { ServiceBroker } from "moleculer";
import type { EventDoc, Marker } from "../records/events";
import { ALL_TENANTS, type ReadView, type Tenant } from "../storage/types";

/**
 * How a service reacts to the event log, at least once (the dispatcher fans events out to
 * deliveries, the workflows service starts the runs they trigger). Every event is stored with the
 * service's marker field set (see `eventDoc`); the service handles it on the `event.stored`
 * wake-up, or else when a sweep finds it still marked after a grace period, and has the events
 * service (the log's owner) unset the marker once handled, one call per batch. What a handler must make safe itself is a sweep racing a wake-up for one event
 * (a unique index on what it creates does it).
 */
/** Handles one tenant's events; answers the ids it could not finish (they stay marked, for the sweep). */
export type TenantHandler = (tenant: Required<Tenant>, events: EventDoc[]) => Promise<Set<string>>;

/**
 * Which swept events this node handles, asked once per batch: null for all of them; a test of an
 * event's id (the others stay marked for the node they fall to, and only their ids are read here);
 * or false for none now (the node's view of its peers is settling): the sweep stops there, and the
 * service sweeps again once it can take its share.
 */
export type SweepShare = () => ((eventId: string) => boolean) | null | false;

/** An event younger than this is left to the node its wake-up went to. */
const GRACE_MS = 2000;
const BATCH = 500;

export class EventConsumer {
  private incoming: EventDoc[] = [];
  private scheduled = false;
  private sweeping = false;
  private stopped = false;

  constructor(
    private readonly events: ReadView<EventDoc>,
    private readonly marker: Marker,
    private readonly handle: TenantHandler,
    private readonly logger: ServiceBroker["logger"],
    /** Unsets the marker of handled events: `unmarkThrough(broker)`, the events service's write. */
    private readonly unmark: (marker: Marker, ids: string[]) => Promise<void>,
    private readonly share: SweepShare = () => null,
  ) {}

  /** A wake-up; the wake-ups of one event-loop turn are handled together (one lookup per tenant). */
  wake(event: EventDoc): void {
    this.incoming.push(event);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.incoming.splice(0);
      if (batch.length > 0 && !this.stopped)
        this.process(batch).catch((err) => this.logger.warn(`handling events failed; the sweep retries them`, err));
    });
  }

  /** Handles the events tenant by tenant, then unsets the marker of those done; answers how many. */
  async process(events: EventDoc[]): Promise<number> {
    const byTenant = new Map<string, EventDoc[]>();
    for (const event of events) {
      const key = `${event.org_id}\n${event.environment}`;
      const group = byTenant.get(key);
      if (group) group.push(event);
      else byTenant.set(key, [event]);
    }
    const incomplete = new Set<string>();
    await Promise.all(
      [...byTenant.values()].map(async (group) => {
        try {
          for (const id of await this.handle({ org_id: group[0].org_id, environment: group[0].environment }, group)) incomplete.add(id);
        } catch (err) {
          this.logger.warn("handling a tenant's events failed; the sweep retries them", err);
          for (const e of group) incomplete.add(e.id);
        }
      }),
    );
    const done = events.filter((e) => !incomplete.has(e.id)).map((e) => e.id);
    if (done.length > 0) await this.unmark(this.marker, done);
    return done.length;
  }

  /**
   * Events still marked after the grace period (their wake-up was lost, or no node ran), batch
   * after batch; `between` runs before each next batch (back-pressure). A batch is read while the
   * one before it is still being handled (at most two are under way), so a backlog's sends never
   * stop between batches. Each read starts at the previous one's last marker and skips the events
   * already taken: one sweep walks the marked events once, and what it leaves marked (not finished,
   * or another node's) waits for the next sweep.
   */
  async sweep(between?: () => Promise<void>): Promise<void> {
    if (this.sweeping || this.stopped) return;
    this.sweeping = true;
    let previous: Promise<unknown> = Promise.resolve();
    try {
      let from: { at: number; taken: Set<string> } | undefined;
      for (;;) {
        const cut = Date.now() - GRACE_MS;
        const limit = BATCH + (from?.taken.size ?? 0);
        // Oldest first, read in order from the sparse marker index: a batch costs its size. Shared
        // among nodes, the batch is read as ids and each node loads only the events that fall to it
        // (a backlog is swept by each node several times before it is done: whole documents read
        // for the others' share cost a node more than its own share's reads).
        const query = { [this.marker]: from ? { $lt: cut, $gte: from.at } : { $lt: cut } };
        const options = { sort: { [this.marker]: 1 as const }, limit };
        const mine = this.share();
        if (mine === false) break;
        const read: Pick<EventDoc, "id" | Marker>[] = mine
          ? await this.events.pluck(ALL_TENANTS, query, ["id", this.marker], options)
          : await this.events.find(ALL_TENANTS, query, options);
        const stale = from ? read.filter((e) => !from!.taken.has(e.id)) : read;
        if (stale.length === 0) break;
        const at = stale[stale.length - 1][this.marker] as number;
        const taken = new Set(from?.at === at ? from.taken : []);
        for (const e of stale) if (e[this.marker] === at) taken.add(e.id);
        from = { at, taken };
        const handling = (mine ? this.load(stale.filter((e) => mine(e.id))) : Promise.resolve(stale as EventDoc[]))
          .then((events) => this.process(events))
          .catch((err: unknown) => this.logger.warn("event sweep: a batch failed; the next sweep retries it", err));
        await previous;
        previous = handling;
        if (read.length < limit || this.stopped) break;
        await between?.();
      }
    } catch (err) {
      this.logger.warn("event sweep failed; the next one retries", err);
    } finally {
      await previous;
      this.sweeping = false;
    }
  }

  /** The events of these ids (those still stored), in that order. */
  private async load(picked: Pick<EventDoc, "id">[]): Promise<EventDoc[]> {
    if (picked.length === 0) return [];
    const byId = new Map((await this.events.find(ALL_TENANTS, { id: { $in: picked.map((e) => e.id) } })).map((e) => [e.id, e]));
    return picked.flatMap((e) => byId.get(e.id) ?? []);
  }

  stop(): void {
    this.stopped = true;
  }
}
