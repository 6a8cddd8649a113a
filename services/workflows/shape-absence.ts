import type { Tenant } from "../../shared/storage/types";

/**
 * How long a node trusts a read that found no live shape of an event type, from the moment the read
 * began. A registration that makes a shape live waits this long (in a cluster) before its run can
 * wait, so every node's answer from before has lapsed by then (decisions/0180).
 */
export const ABSENT_MS = 1000;
/**
 * The most a node's clock may be ahead of another's: the event path counts a shape as live this long
 * past its `until`, and a registration revives (rather than extends) a shape lapsed by half of it.
 */
export const CLOCK_SKEW_MS = 60_000;

/** What a read began with: its answers are kept only if nothing was dropped meanwhile. */
export interface Begun {
  at: number;
  generation: number;
}

/**
 * The event types of a tenant that no run waits for (no live wait shape), as this node last read
 * them, each for ABSENT_MS: an event of such a type costs no read of the shapes. A shape made live
 * on this node drops its type at once; on another node, the registration's wait outlasts the entry.
 */
export class ShapeAbsence {
  /** `org\nenv\ntype` → when the entry lapses (this process's monotonic ms). */
  private readonly until = new Map<string, number>();
  private generation = 0;

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly ttlMs = ABSENT_MS,
    private readonly max = 10_000,
  ) {}

  private static key(tenant: Required<Tenant>, type: string): string {
    return `${tenant.org_id}\n${tenant.environment}\n${type}`;
  }

  /** Those of `types` not known to have no shape: what a read must look for. */
  unknown(tenant: Required<Tenant>, types: readonly string[]): string[] {
    const now = this.now();
    return types.filter((type) => {
      const key = ShapeAbsence.key(tenant, type);
      const until = this.until.get(key);
      if (until === undefined) return true;
      if (until > now) return false;
      this.until.delete(key);
      return true;
    });
  }

  /** Taken before the read of the shapes. */
  begin(): Begun {
    return { at: this.now(), generation: this.generation };
  }

  /** The read begun at `begun` found no live shape of `types`: kept, unless a shape was made live here since it began. */
  keep(tenant: Required<Tenant>, types: readonly string[], begun: Begun): void {
    if (begun.generation !== this.generation) return;
    for (const type of types) {
      const key = ShapeAbsence.key(tenant, type);
      this.until.delete(key);
      if (this.until.size >= this.max) {
        // The oldest first (a Map keeps insertion order).
        const oldest = this.until.keys().next().value;
        if (oldest !== undefined) this.until.delete(oldest);
      }
      this.until.set(key, begun.at + this.ttlMs);
    }
  }

  /** A shape of `type` was made live (or seen being made live): forgotten, and no read under way is kept. */
  drop(tenant: Required<Tenant>, type: string): void {
    this.generation += 1;
    this.until.delete(ShapeAbsence.key(tenant, type));
  }
}
