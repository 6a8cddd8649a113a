import type { Tenant } from "../../shared/storage/types";
import type { WebhookTrigger } from "../../shared/api/wire";
import type { HookDoc } from "./hooks.logic";

/** What verifying a request to a hook needs, without a read of the store. */
export interface HookEntry {
  tenant: Required<Tenant>;
  workflowId: string;
  trigger: WebhookTrigger;
  hook: HookDoc;
  /** The value of the stored secret the trigger names (`{{secrets.NAME}}`), when it could be opened. */
  stored: string | null;
}

/**
 * Hooks by id, loaded once and kept, so that refusing a request costs no read of the store: a
 * flood of bad signatures is answered from memory. An id that names no active hook is kept too, for
 * less time. Every write that changes a hook (its workflow's update or deletion, a rotation, a
 * change of the tenant's secrets) drops it on every workflows node (HOOKS_CHANGED); the time limit
 * is the backstop for a drop that was lost.
 */
export class HookCache {
  private readonly entries = new Map<string, { entry: HookEntry | null; until: number }>();
  private readonly loading = new Map<string, Promise<HookEntry | null>>();
  /** Ids dropped while their load was under way: that load's answer is not kept. */
  private readonly dropped = new Set<string>();

  constructor(
    private readonly load: (id: string) => Promise<HookEntry | null>,
    private readonly ttlMs = 30_000,
    private readonly missTtlMs = 5_000,
    private readonly max = 10_000,
  ) {}

  async get(id: string, now = Date.now()): Promise<HookEntry | null> {
    const kept = this.entries.get(id);
    if (kept && kept.until > now) return kept.entry;
    // One read per id, whatever the number of requests waiting for it.
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.load(id).finally(() => this.loading.delete(id));
      this.loading.set(id, pending);
      let entry: HookEntry | null;
      try {
        entry = await pending;
      } catch (err) {
        this.dropped.delete(id);
        throw err;
      }
      // Dropped while it loaded: not kept, the next request reads again.
      if (!this.dropped.delete(id)) this.keep(id, entry, now);
      return entry;
    }
    return pending;
  }

  private keep(id: string, entry: HookEntry | null, now: number): void {
    if (this.entries.size >= this.max) {
      // The oldest first (a Map keeps insertion order).
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(id, { entry, until: now + (entry ? this.ttlMs : this.missTtlMs) });
  }

  forget(ids: readonly string[]): void {
    for (const id of ids) {
      this.entries.delete(id);
      if (this.loading.has(id)) this.dropped.add(id);
    }
  }

  forgetTenant(tenant: Tenant): void {
    for (const [id, { entry }] of this.entries)
      if (entry && entry.tenant.org_id === tenant.org_id && (!tenant.environment || entry.tenant.environment === tenant.environment))
        this.entries.delete(id);
    for (const id of this.loading.keys()) this.dropped.add(id);
  }

  clear(): void {
    this.entries.clear();
    for (const id of this.loading.keys()) this.dropped.add(id);
  }
}
