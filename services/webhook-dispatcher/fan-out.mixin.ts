import { randomUUID } from "node:crypto";
import type { ServiceSchema } from "moleculer";
import { isDuplicate } from "../../shared/errors";
import { payloadOf, type EventDoc } from "../../shared/records/events";
import { webhookRowsOf } from "../../shared/records/outcomes";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { claimedDelivery, freshDelivery, ownerOf, subscribes } from "./dispatcher.logic";
import { FAST_MS, VIEW_SETTLE_MS, type DispatcherMethods, type DispatcherVars, type FanOut, type Target } from "./dispatcher.types";

/**
 * Fan-out: each stored event becomes one delivery per subscribed, enabled webhook of its
 * environment, its first attempt queued at once; and which dispatcher node takes which swept event.
 */
const FanOutSchema: Partial<ServiceSchema<PlatformSettings, DispatcherMethods, DispatcherVars>> = {
  methods: {
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
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const FanOutMixin = FanOutSchema as Partial<ServiceSchema>;
