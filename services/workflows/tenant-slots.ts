import type { Tenant } from "../../shared/storage/types";

/**
 * How a workflows node shares the runs it drives at once (its slots) between tenants, the way the
 * webhook dispatcher's lanes share deliveries between endpoints (services/webhook-dispatcher/lanes.ts):
 * an organization holds at most `perOrg` of the slots and one of its environments at most
 * `perEnvironment`, so whatever one tenant's runs do (wait on a slow server, arrive by the
 * thousand from an event), `total - perOrg` slots stay for the other organizations and
 * `perOrg - perEnvironment` for the organization's other environment. Tenants with due runs take
 * turns for free slots, each claiming one run per turn.
 *
 * Only counts and a turn order are kept here: which runs are due is in the store (engine.ts).
 */
export interface Shares {
  total: number;
  perOrg: number;
  perEnvironment: number;
}

/** Shares of `total` slots: three quarters to one organization, five eighths to one of its environments. */
export function sharesOf(total: number): Shares {
  return { total, perOrg: Math.max(1, Math.floor((total * 3) / 4)), perEnvironment: Math.max(1, Math.floor((total * 5) / 8)) };
}

const keyOf = (t: Required<Tenant>): string => `${t.org_id}/${t.environment}`;

export class TenantSlots {
  private taken = 0;
  private readonly byOrg = new Map<string, number>();
  private readonly byTenant = new Map<string, number>();
  /** Tenants that may have due runs, in turn order (a Map keeps insertion order; a turn moves one to the back). */
  private readonly turns = new Map<string, Required<Tenant>>();

  constructor(readonly shares: Shares) {}

  /** Slots taken on this node. */
  get active(): number {
    return this.taken;
  }

  /** Whether one more run of `t` may start here now. */
  room(t: Required<Tenant>): boolean {
    return (
      this.taken < this.shares.total &&
      (this.byOrg.get(t.org_id) ?? 0) < this.shares.perOrg &&
      (this.byTenant.get(keyOf(t)) ?? 0) < this.shares.perEnvironment
    );
  }

  take(t: Required<Tenant>): void {
    this.taken += 1;
    this.byOrg.set(t.org_id, (this.byOrg.get(t.org_id) ?? 0) + 1);
    this.byTenant.set(keyOf(t), (this.byTenant.get(keyOf(t)) ?? 0) + 1);
  }

  give(t: Required<Tenant>): void {
    this.taken -= 1;
    const org = (this.byOrg.get(t.org_id) ?? 1) - 1;
    if (org > 0) this.byOrg.set(t.org_id, org);
    else this.byOrg.delete(t.org_id);
    const own = (this.byTenant.get(keyOf(t)) ?? 1) - 1;
    if (own > 0) this.byTenant.set(keyOf(t), own);
    else this.byTenant.delete(keyOf(t));
  }

  /** `t` may have due runs: it takes turns until a claim of its finds none. */
  waiting(t: Required<Tenant>): void {
    if (!this.turns.has(keyOf(t))) this.turns.set(keyOf(t), { org_id: t.org_id, environment: t.environment });
  }

  /** A claim of `t`'s found no due run: it leaves the turns until it is woken or found again. */
  rested(t: Required<Tenant>): void {
    this.turns.delete(keyOf(t));
  }

  /** Tenants taking turns (with room or not). */
  get queued(): number {
    return this.turns.size;
  }

  /** The next tenant in turn with room (moved to the back of the turns), or undefined. */
  next(): Required<Tenant> | undefined {
    if (this.taken >= this.shares.total) return undefined;
    for (const [key, t] of this.turns) {
      if (!this.room(t)) continue;
      this.turns.delete(key);
      this.turns.set(key, t);
      return t;
    }
    return undefined;
  }
}
