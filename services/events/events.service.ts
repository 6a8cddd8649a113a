import { traceOf } from "../../shared/runtime/trace";
import type { Context, ServiceSchema } from "moleculer";
import { callerOf, tenantOf, type CallMeta } from "../../shared/api/context";
import { DELIVERIES } from "../../shared/records/deliveries";
import { isDuplicate, notFound } from "../../shared/errors";
import {
  EVENT_STORED,
  eventDoc,
  EVENTS,
  eventView,
  isSystemType,
  SYSTEM_EVENT_TYPES,
  type EventDoc,
  type EventView,
  type Marker,
  type NewEvent,
  type PublishedEvent,
} from "../../shared/records/events";
import { nowIso } from "../../shared/ids";
import {
  cappedTotal,
  checkDepth,
  cursorOf,
  MAX_COUNTED,
  newestFirst,
  pageByKey,
  skipOf,
  type ListResult,
} from "../../shared/api/pagination";
import {
  FINISHED_RUN_STATUSES,
  firstIdAt,
  prune,
  pruneAction,
  Pruner,
  retentionCutoff,
  RUN_RETENTION_INDEXES,
  RUNS_COLLECTION,
  type PruneControl,
  type RunRef,
} from "../../shared/records/retention";
import { forwardToListeners, ListenerAnnouncementsMixin } from "../../shared/records/listeners";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { ALL_TENANTS, collectionSpec, type Doc, type Filter } from "../../shared/storage/types";
import type { EventType } from "../../shared/api/wire";
import { checkEmittable } from "./events.logic";
import {
  emitParams,
  idParams,
  listParams,
  publishParams,
  typesParams,
  unmarkParams,
  type EmitParams,
  type IdParams,
  type ListParams,
  type TypesParams,
} from "./events.params";

/** A custom type an environment has emitted at least once, for the catalogue. */
interface TypeDoc extends Doc {
  type: string;
  first_seen_at: string;
}

/**
 * The event log is this service's alone: other services hand their events over (`publish`) and
 * have their markers unset (`unmark`). It reads deliveries and runs only to keep the events a
 * pending delivery or an unfinished run still refers to.
 */
const STORE = declareStore({
  owns: {
    events: EVENTS,
    types: collectionSpec<TypeDoc>("event_types", [{ fields: { org_id: 1, environment: 1, type: 1 } }]),
  },
  reads: { deliveries: DELIVERIES, runs: collectionSpec<RunRef>(RUNS_COLLECTION, RUN_RETENTION_INDEXES) },
});

interface EventsVars extends StoreVars<typeof STORE> {
  /** Custom types already in the catalogue, so most emits skip that write. */
  knownTypes: Set<string>;
  pruner: Pruner;
}
interface EventsMethods {
  /** Stores an event, then wakes whoever reacts to events (one node of each listening service). */
  append(input: NewEvent): Promise<EventDoc>;
  noteType(event: Pick<EventDoc, "org_id" | "environment" | "type" | "created_at">): Promise<void>;
  /** Deletes the events older than EVENT_RETENTION_DAYS (as of `now`) that nothing still needs. */
  pruneEvents(now: number, control: PruneControl): Promise<number>;
}
type Ctx<P> = Context<P, CallMeta>;

/** The event log: emitted by clients (`source: api`) or recorded by services, always stored first. */
const EventsService: ServiceSchema<PlatformSettings, EventsMethods, EventsVars> = {
  name: "events",
  // The event log's one writer also hands events to the gateways holding listener streams (shared/records/listeners.ts).
  mixins: [StoreMixin(STORE), ListenerAnnouncementsMixin],

  actions: {
    /** POST /events — events:write */
    emit: {
      params: emitParams,
      async handler(ctx: Ctx<EmitParams>): Promise<EventView> {
        const { org_id, environment } = callerOf(ctx);
        const data = checkEmittable(ctx.params.type, ctx.params.data);
        // The catalogue first: noting a type twice is harmless, so a failure of either write leaves
        // no event behind that the client was told is not stored (a retry would store it twice).
        await this.noteType({ org_id, environment, type: ctx.params.type, created_at: nowIso() });
        // Posted by a run's http step: the event goes on the run's chain (shared/records/chain.ts).
        const event = await this.append({
          org_id,
          environment,
          type: ctx.params.type,
          data,
          source: "api",
          ...traceOf(ctx.meta),
          ...ctx.meta.chain,
        });
        return eventView(event);
      },
    },

    /** GET /events — events:read; newest first, optionally one type. */
    list: {
      params: listParams,
      async handler(ctx: Ctx<ListParams>): Promise<ListResult<EventView>> {
        const filter: Filter = ctx.params.type ? { type: ctx.params.type } : {};
        return newestFirst(this.events, tenantOf(ctx), filter, ctx.params, eventView);
      },
    },

    /** GET /events/{id} — events:read */
    get: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<EventView> {
        const event = await this.events.get(tenantOf(ctx), ctx.params.id);
        if (!event) throw notFound("event", ctx.params.id);
        return eventView(event);
      },
    },

    /** GET /events/types — events:read; the system types, then the custom types this environment has emitted. */
    types: {
      params: typesParams,
      async handler(ctx: Ctx<TypesParams>): Promise<ListResult<EventType>> {
        const tenant = tenantOf(ctx);
        const system = Object.entries(SYSTEM_EVENT_TYPES).map(([type, description]): EventType => ({
          object: "event_type",
          type,
          description,
          system: true,
        }));
        const customView = (t: TypeDoc): EventType => ({
          object: "event_type",
          type: t.type,
          description: null,
          system: false,
          first_seen_at: t.first_seen_at,
        });
        // Custom types come from the store in name order along its index: as many as the page needs.
        const custom = (filter: Filter, sort: 1 | -1, skip: number, limit: number) =>
          limit <= 0
            ? Promise.resolve([])
            : this.types.find(tenant, filter, { sort: { type: sort }, skip, limit }).then((d) => d.map(customView));
        const counted = cappedTotal(this.types, tenant, {}).then((c) => {
          const total = Math.min(MAX_COUNTED, system.length + c.total);
          const capped = c.total_capped || system.length + c.total > MAX_COUNTED;
          return { total, ...(capped && { total_capped: true as const }) };
        });
        const cursor = cursorOf(ctx.params);
        if (cursor !== undefined) {
          const [page, total] = await Promise.all([
            pageByKey(system, (t) => t.type, cursor, {
              after: (key, n) => custom(key === undefined ? {} : { type: { $gt: key } }, 1, 0, n),
              before: (key, n) => custom({ type: { $lt: key } }, -1, 0, n),
            }),
            counted,
          ]);
          return { ...page, ...total };
        }
        checkDepth(ctx.params);
        const start = skipOf(ctx.params);
        const shown = system.slice(start, start + ctx.params.per_page);
        const [seen, total] = await Promise.all([
          custom({}, 1, Math.max(0, start - system.length), ctx.params.per_page - shown.length),
          counted,
        ]);
        return { items: [...shown, ...seen], ...total, page: ctx.params.page, per_page: ctx.params.per_page };
      },
    },

    /**
     * Internal: stores events other services hand over (from their outboxes, or a run's), each under
     * the id and time it was given; an id stored already is skipped, so a second hand-over of the
     * same events stores nothing. Answers the ids stored now.
     */
    publish: {
      visibility: "public",
      params: publishParams,
      async handler(ctx: Context<{ events: PublishedEvent[] }>): Promise<string[]> {
        const now = Date.now();
        // The catalogue first, as for POST /events: a workflow's `emit` step publishes custom types too.
        for (const input of ctx.params.events) if (!isSystemType(input.type)) await this.noteType(input);
        const stored = await Promise.all(
          ctx.params.events.map(async (input) => {
            const doc = eventDoc(input, now);
            try {
              await this.events.insert(doc);
              return doc;
            } catch (err) {
              if (isDuplicate(err)) return null;
              throw err;
            }
          }),
        );
        const fresh = stored.filter((doc): doc is EventDoc => doc !== null);
        // A lost wake-up only delays the reaction until the next sweep of the log.
        for (const event of fresh) {
          this.broker.emit(EVENT_STORED, { event }).catch(() => undefined);
          forwardToListeners(this.broker, event);
        }
        return fresh.map((doc) => doc.id);
      },
    },

    /** Internal: a service that reacts to events has handled these; one write for the batch. */
    unmark: {
      visibility: "public",
      params: unmarkParams,
      handler(ctx: Context<{ marker: Marker; ids: string[] }>): Promise<number> {
        return this.events.updateMany(ALL_TENANTS, { id: { $in: ctx.params.ids } }, { $unset: { [ctx.params.marker]: true } });
      },
    },

    /** Internal (operators, tests): a retention pass now, or as of `now`. */
    prune: pruneAction,
  },

  methods: {
    async append(input) {
      const doc = eventDoc(input, Date.now());
      await this.events.insert(doc);
      // A lost wake-up only delays the reaction until the next sweep of the log.
      this.broker.emit(EVENT_STORED, { event: doc }).catch(() => undefined);
      forwardToListeners(this.broker, doc);
      return doc;
    },

    async noteType(event) {
      const id = `${event.org_id}:${event.environment}:${event.type}`;
      if (this.knownTypes.has(id)) return;
      try {
        await this.types.insert({
          id,
          org_id: event.org_id,
          environment: event.environment,
          type: event.type,
          first_seen_at: event.created_at ?? nowIso(),
        });
      } catch (err) {
        if (!isDuplicate(err)) throw err;
      }
      if (this.knownTypes.size > 100_000) this.knownTypes.clear();
      this.knownTypes.add(id);
    },

    pruneEvents(now, control) {
      const days = this.settings.config.eventRetentionDays;
      return prune(
        {
          collection: this.events,
          field: "id",
          before: firstIdAt("evt", retentionCutoff(days, now)),
          // Not yet fanned out or not yet looked at for triggers: a service still has to handle it.
          removable: { undispatched_since: { $exists: false }, untriggered_since: { $exists: false } },
          // A pending delivery still sends the event; an unfinished run started from it is kept with it.
          stillNeeded: async (range) => {
            const [pending, unfinished] = await Promise.all([
              this.deliveries.find(ALL_TENANTS, { event_id: range, status: "pending" }),
              this.runs.find(ALL_TENANTS, { "trigger.event_id": range, status: { $nin: [...FINISHED_RUN_STATUSES] } }),
            ]);
            return [...new Set([...pending.map((d) => d.event_id), ...unfinished.map((r) => String(r.trigger.event_id))])];
          },
        },
        control,
      );
    },
  },

  created() {
    this.knownTypes = new Set();
    this.pruner = new Pruner("events", (now, control) => this.pruneEvents(now, control), this.logger);
  },

  started() {
    this.pruner.start();
  },

  async stopped() {
    await this.pruner.stop();
  },
};

export default EventsService;
