import { isDuplicate } from "../../shared/errors";
import { collectionSpec, type Collection, type Doc } from "../../shared/storage/types";

/** A throttled webhook's next free start (epoch ms), shared by every dispatcher node. */
export interface ThrottleDoc extends Doc {
  /** The webhook's id. */
  id: string;
  next_at: number;
}

/** One document per throttled webhook: the next start time its deliveries may take (the dispatcher's). */
export const THROTTLES = collectionSpec<ThrottleDoc>("webhook_throttles", []);

/** Compare-and-set rounds before a reservation gives up (the lane tries again one gap later). */
const TRIES = 8;

/**
 * Start times for a webhook's deliveries at most `rate` per second, across all dispatcher nodes:
 * one document per throttled webhook holds its next free start, taken by compare-and-set, so two
 * nodes never hand out the same slot. One read and one write per throttled delivery.
 */
export class SharedThrottle {
  constructor(private readonly throttles: Collection<ThrottleDoc>) {}

  async reserve(orgId: string, webhookId: string, rate: number): Promise<number> {
    const gap = 1000 / rate;
    const scope = { org_id: orgId };
    for (let i = 0; i < TRIES; i++) {
      const now = Date.now();
      const doc = await this.throttles.get(scope, webhookId);
      if (!doc) {
        try {
          await this.throttles.insert({ id: webhookId, org_id: orgId, next_at: Math.ceil(now + gap) });
          return now;
        } catch (err) {
          if (!isDuplicate(err)) throw err;
          continue;
        }
      }
      const at = Math.max(doc.next_at, now);
      if (await this.throttles.update(scope, { id: webhookId, next_at: doc.next_at }, { $set: { next_at: Math.ceil(at + gap) } }))
        return at;
    }
    throw new Error(`webhook ${webhookId}: its throttle slot stayed contended`);
  }

  /** A deleted webhook's slot goes with it. */
  async forget(orgId: string, webhookId: string): Promise<void> {
    await this.throttles.delete({ org_id: orgId }, { id: webhookId });
  }
}
