export interface RateDecision {
  allowed: boolean;
  /** The cluster-wide limit per window. */
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  reset: number;
}

/**
 * Fixed-window limit per API key (and, as other instances, per organization and per client address). The limit holds for the cluster: each gateway node enforces its
 * share, `ceil(max / live gateway nodes)`, so N nodes behind a balancer admit about `max` in all.
 */
export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly nodes: () => number,
  ) {}

  hit(key: string, now = Date.now()): RateDecision {
    const start = now - (now % this.windowMs);
    let window = this.windows.get(key);
    if (!window || window.start !== start) {
      window = { start, count: 0 };
      this.windows.set(key, window);
    }
    const nodes = Math.max(1, this.nodes());
    const share = Math.max(1, Math.ceil(this.max / nodes));
    const allowed = window.count < share;
    if (allowed) window.count += 1;
    const reset = Math.max(1, Math.ceil((start + this.windowMs - now) / 1000));
    return { allowed, limit: this.max, remaining: Math.min(this.max, (share - window.count) * nodes), reset };
  }

  /** The decision `hit` would make, without counting this request. */
  check(key: string, now = Date.now()): RateDecision {
    const start = now - (now % this.windowMs);
    const window = this.windows.get(key);
    const count = window && window.start === start ? window.count : 0;
    const nodes = Math.max(1, this.nodes());
    const share = Math.max(1, Math.ceil(this.max / nodes));
    const reset = Math.max(1, Math.ceil((start + this.windowMs - now) / 1000));
    return { allowed: count < share, limit: this.max, remaining: Math.min(this.max, (share - count) * nodes), reset };
  }

  sweep(now = Date.now()): void {
    const current = now - (now % this.windowMs);
    for (const [key, window] of this.windows) if (window.start < current) this.windows.delete(key);
  }
}
