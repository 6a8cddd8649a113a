import type { ServiceSchema } from "moleculer";
import { isDuplicate } from "../../shared/errors";
import type { EventDoc } from "../../shared/records/events";
import type { PlatformSettings } from "../../shared/runtime/platform";
import type { Tenant } from "../../shared/storage/types";
import type { RunEngine } from "./engine";
import type { RunDoc } from "./run-doc";
import { updateOf, type RunWrite } from "./run-write.logic";
import { cancelledByEvent, eventArrived, waitState } from "./wait-moves.logic";
import type { Registration, ShapeDoc, WaitDoc } from "./wait-records";
import { eventMatch, filterPasses, holds, keyOf, shapeId, SHAPES_PER_TYPE_MAX } from "./waits.logic";
import type { WorkflowsStoreVars } from "./workflows.store";

/** Registrations read per page when one key holds many (each is work: a run resumed or cancelled). */
const PAGE = 200;
/** Compare-and-sets of one run lost to other writers before the event is left to the sweep. */
const TRIES = 10;

interface WaitsVars extends WorkflowsStoreVars {
  engine: RunEngine;
}
export interface WaitsMethods {
  /** Stores a run's registrations and their shapes (the engine, before it parks the run); null, or why they are refused. */
  registerWaits(run: RunDoc, registrations: Registration[]): Promise<string | null>;
  /** Resumes the runs waiting for `events` and cancels those their cancel_on names; answers the events not done. */
  resolveWaits(tenant: Required<Tenant>, events: EventDoc[]): Promise<Set<string>>;
  /** A run ended: its registrations of this attempt go (those left by a failure here are pruned at their `until`). */
  forgetWaits(run: RunDoc): void;
}
interface Methods extends WaitsMethods {
  /**
   * One registration met by `event`: its run resumed or cancelled under a compare-and-set, then the
   * registration deleted; false when the run is not parked yet (the event comes back with the sweep).
   */
  settle(tenant: Required<Tenant>, wait: WaitDoc, event: EventDoc): Promise<boolean>;
}

/**
 * Events that runs wait for (wait_for_event) or are cancelled by (cancel_on), through the event log's
 * "untriggered" marker as the trigger is (triggers.mixin.ts): an event stays marked until every
 * registration it meets is settled, so one stored while no workflows node runs, or whose node dies
 * midway, is settled by the sweep. Settling is a compare-and-set on the run's revision (as an
 * approval is): an event handled twice, or two events for one wait, move the run once.
 */
export const WaitsMixin: Partial<ServiceSchema<PlatformSettings, Methods, WaitsVars>> = {
  methods: {
    async registerWaits(run, registrations) {
      const tenant = { org_id: run.org_id, environment: run.environment };
      for (const { wait, paths } of registrations) {
        const id = shapeId(tenant, wait.event_type, paths);
        const shape = await this.shapes.get(tenant, id);
        if (!shape) {
          const now = new Date().toISOString();
          const live = await this.shapes.count(
            tenant,
            { event_type: wait.event_type, until: { $gte: now } },
            { limit: SHAPES_PER_TYPE_MAX },
          );
          if (live >= SHAPES_PER_TYPE_MAX)
            return `${SHAPES_PER_TYPE_MAX} different sets of match paths wait on ${wait.event_type} in this environment already (SHAPES_PER_TYPE_MAX): match on the same paths as the others`;
          const doc: ShapeDoc = { id, ...tenant, event_type: wait.event_type, paths, until: wait.until };
          try {
            await this.shapes.insert(doc);
          } catch (err) {
            if (!isDuplicate(err)) throw err;
          }
        }
        // The shape lives as long as its longest registration.
        await this.shapes.update(tenant, { id, until: { $lt: wait.until } }, { $set: { until: wait.until } });
        try {
          await this.waits.insert(wait);
        } catch (err) {
          if (!isDuplicate(err)) throw err;
          // Registered by a claim that died before its write: as this one begins it.
          const { id: _id, org_id: _o, environment: _e, ...fields } = wait;
          await this.waits.update(tenant, { id: wait.id }, { $set: fields });
        }
      }
      return null;
    },

    forgetWaits(run) {
      if (!run.cancel_armed && !run.definition.some((s: { type: string }) => s.type === "wait_for_event")) return;
      const tenant = { org_id: run.org_id, environment: run.environment };
      // This attempt's only: a retry of the run registers afresh, perhaps before this lands.
      this.waits
        .deleteMany(tenant, { run_id: run.id, attempt: run.attempt ?? 1 })
        .catch((err: unknown) => this.logger.debug(`run ${run.id}: its registrations are left to be pruned`, err));
    },

    async resolveWaits(tenant, events) {
      const incomplete = new Set<string>();
      const types = [...new Set(events.map((e: EventDoc) => e.type))];
      const now = new Date().toISOString();
      const shapes = await this.shapes.find(tenant, { event_type: { $in: types }, until: { $gte: now } });
      if (shapes.length === 0) return incomplete;
      // The key each event has under each shape of its type; the registrations under those keys.
      const byKey = new Map<string, EventDoc[]>();
      for (const event of events)
        for (const shape of shapes) {
          if (shape.event_type !== event.type) continue;
          const match = eventMatch(event, shape.paths);
          if (!match) continue;
          const key = keyOf(event.type, match);
          byKey.set(key, [...(byKey.get(key) ?? []), event]);
        }
      if (byKey.size === 0) return incomplete;
      const settleAll = (page: WaitDoc[]) =>
        Promise.all(
          page.map(async (wait) => {
            // The earliest event that meets it, of those it may count.
            const met = (byKey.get(wait.key) ?? [])
              .filter(
                (e) => e.created_at >= wait.since && e.created_at < wait.until && holds(e, wait.match) && filterPasses(wait.filter, e),
              )
              .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1))[0];
            if (!met) return;
            try {
              if (!(await this.settle(tenant, wait, met))) for (const e of byKey.get(wait.key) ?? []) incomplete.add(e.id);
            } catch (err) {
              this.logger.warn(`run ${wait.run_id}: settling its ${wait.kind} on event ${met.id} failed; the sweep retries it`, err);
              for (const e of byKey.get(wait.key) ?? []) incomplete.add(e.id);
            }
          }),
        );
      // Usually every registration the keys hold, in one read.
      const keys = [...byKey.keys()];
      const all = await this.waits.find(tenant, { key: { $in: keys } }, { limit: PAGE });
      if (all.length < PAGE) {
        await settleAll(all);
        return incomplete;
      }
      // More: key by key, in pages along the index's own order (no sort of what one key holds).
      for (const key of keys) {
        let after: string | undefined;
        for (;;) {
          const page = await this.waits.find(
            tenant,
            { key, ...(after !== undefined && { id: { $gt: after } }) },
            { sort: { id: 1 }, limit: PAGE },
          );
          await settleAll(page);
          if (page.length < PAGE) break;
          after = page[page.length - 1].id;
        }
      }
      return incomplete;
    },

    async settle(tenant, wait, event) {
      for (let tries = 0; tries < TRIES; tries += 1) {
        const run = await this.runs.get(tenant, wait.run_id);
        let write: RunWrite | null = null;
        const state = run && wait.kind === "wait" ? waitState(run, wait) : null;
        // Registered, not parked yet: settled on a later pass, once the engine's write is stored.
        if (state === "arming") return false;
        if (run && state === "waits") write = eventArrived(run, event, Date.now());
        if (run && wait.kind === "cancel" && !["succeeded", "failed", "cancelled"].includes(run.status))
          write = cancelledByEvent(run, event, Date.now());
        if (write === null || !run) {
          // The run moved on (or ended): the registration has nothing left to do.
          await this.waits.delete(tenant, { id: wait.id });
          return true;
        }
        const updated = await this.runs.update(tenant, { id: run.id, rev: run.rev }, updateOf(write));
        if (updated) {
          await this.waits.delete(tenant, { id: wait.id });
          this.engine.wake(run.id, tenant);
          return true;
        }
      }
      // The run kept changing under this settlement: left marked for the sweep to settle again.
      this.logger.debug(`run ${wait.run_id}: its ${wait.kind} not settled on event ${event.id}: ${TRIES} writes lost`);
      return false;
    },
  },
};
