import type { Identity, Invalidation } from "../../shared/api/identity";

/**
 * A gateway's cache of resolved tokens. Revocation reaches it through `invalidate` before the
 * revoking request is answered; a short TTL bounds staleness for a node that was unreachable then.
 * A lookup that raced with an invalidation is not cached (the epoch moved), and keys revoked
 * recently are remembered so that requests already in flight with them are refused on the way out.
 */
export class IdentityCache {
  private readonly entries = new Map<string, { identity: Identity; until: number }>();
  private readonly pending = new Map<string, Promise<Identity>>();
  private readonly revokedAt = new Map<string, number>();
  private epoch = 0;

  constructor(
    private readonly lookup: (token: string) => Promise<Identity>,
    private readonly ttlMs: number,
  ) {}

  async get(token: string): Promise<Identity> {
    const hit = this.entries.get(token);
    const now = Date.now();
    if (hit && hit.until > now) return hit.identity;
    let inFlight = this.pending.get(token);
    if (!inFlight) {
      const epoch = this.epoch;
      inFlight = this.lookup(token).then(
        (identity) => {
          this.pending.delete(token);
          if (epoch === this.epoch && !this.revokedAt.has(identity.key_id)) {
            this.entries.set(token, { identity, until: Date.now() + this.ttlMs });
          }
          return identity;
        },
        (err: unknown) => {
          this.pending.delete(token);
          throw err;
        },
      );
      this.pending.set(token, inFlight);
    }
    return inFlight;
  }

  invalidate({ key_id, org_id }: Invalidation): void {
    this.epoch += 1;
    if (key_id) this.revokedAt.set(key_id, Date.now());
    for (const [token, { identity }] of this.entries) {
      if (identity.key_id === key_id || identity.org_id === org_id) this.entries.delete(token);
    }
  }

  /** True when the key was revoked through this node's cache since it started serving. */
  wasRevoked(keyId: string): boolean {
    return this.revokedAt.has(keyId);
  }

  clear(): void {
    this.epoch += 1;
    this.entries.clear();
  }

  /** Forget expired entries and revocations older than any cache entry could be. */
  sweep(now = Date.now()): void {
    for (const [token, entry] of this.entries) if (entry.until <= now) this.entries.delete(token);
    for (const [keyId, at] of this.revokedAt) if (at + 10 * this.ttlMs < now) this.revokedAt.delete(keyId);
  }

  get size(): number {
    return this.entries.size;
  }
}
