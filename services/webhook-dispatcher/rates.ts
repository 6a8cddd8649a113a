import type { ServiceBroker } from "moleculer";

/** How long a count of dispatcher nodes is reused before the registry is read again. */
const RECOUNT_MS = 1000;

/**
 * A webhook's `rate_limit` as one dispatcher node's share: the limit divided by the dispatcher
 * nodes running now, so all of them together never send faster than the limit. (A node whose
 * share of the work is smaller than its share of the rate sends below the limit; the limit is a
 * ceiling, not a promise of throughput.)
 */
export class RateShare {
  private nodes = 1;
  private countedAt = 0;

  constructor(
    private readonly broker: ServiceBroker,
    private readonly service: string,
  ) {}

  of(rateLimit: number | null | undefined): number | null {
    if (rateLimit === null || rateLimit === undefined) return null;
    const now = Date.now();
    if (now - this.countedAt > RECOUNT_MS) {
      const ids = new Set(
        this.broker.registry
          .getServiceList({ onlyAvailable: true, skipInternal: true })
          .filter((svc: { name: string }) => svc.name === this.service)
          .map((svc: { nodeID?: string }) => svc.nodeID),
      );
      this.nodes = Math.max(1, ids.size);
      this.countedAt = now;
    }
    return rateLimit / this.nodes;
  }
}
