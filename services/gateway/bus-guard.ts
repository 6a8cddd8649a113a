import type { ServiceBroker } from "moleculer";
import { ApiError } from "../../shared/errors";
import type { BusLink } from "../../shared/runtime/transporter";

/**
 * How long a gateway may go without hearing from nats-server (no packet, no answer to its pings,
 * sent every 0.5 s while idle) and still serve identities from its cache. Beyond it, a revocation
 * may have been sent while the gateway could not hear it, so keyed requests answer 503. It is at
 * most the auth service's wait for a gateway's confirmation (2 s): by the time a revocation is
 * answered without this gateway's confirmation, this gateway has been silent at least that long
 * and refuses the key like every other request.
 */
export const BUS_SILENCE_LIMIT_MS = 2_000;

/** The node's link to nats-server, when it has one (no TRANSPORTER: one process, nothing to lose). */
export function busLinkOf(broker: ServiceBroker): BusLink | undefined {
  const tx = (broker.transit as { tx?: Partial<BusLink> } | undefined)?.tx;
  return tx && typeof tx.silentMs === "function" ? (tx as BusLink) : undefined;
}

/**
 * Keeps a gateway's identity cache honest about the bus: invalidations sent while it was away are
 * lost, so every reconnect drops the cache before the next key is looked up, and while the bus is
 * out of reach beyond the bound no cached identity is trusted.
 */
export class BusGuard {
  private generation: number;

  constructor(
    private readonly link: BusLink | undefined,
    private readonly dropCache: () => void,
  ) {
    this.generation = link?.generation ?? 0;
  }

  /** Before a key is looked up: throws 503 service_unavailable while the bus is out of reach. */
  check(now = Date.now()): void {
    if (!this.link) return;
    if (this.link.generation !== this.generation) {
      this.generation = this.link.generation;
      this.dropCache();
    }
    if (this.link.silentMs(now) > BUS_SILENCE_LIMIT_MS) {
      throw new ApiError("service_unavailable", "This gateway cannot reach the cluster's bus; retry shortly", { retry_after: 1 });
    }
  }

  reachable(now = Date.now()): boolean {
    return !this.link || this.link.silentMs(now) <= BUS_SILENCE_LIMIT_MS;
  }
}
