import type { Agent } from "undici";
import { outbound, outboundAgent } from "../../shared/net/outbound";
import { ATTEMPT_RESPONSE_LIMITS, type AttemptResponse } from "../../shared/api/wire";
import { responseOf } from "./capture";

export interface SendResult {
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  /** What the receiver answered, bounded (see capture.ts); absent when nothing answered. */
  response?: AttemptResponse;
}

/** A pool unused this long is closed (its keep-alive connections with it). */
export const POOL_IDLE_MS = 60_000;
/** Idle keep-alive connections of a pool close after this long. */
const KEEP_ALIVE_MS = 10_000;

interface Pool {
  agent: Agent;
  inFlight: number;
  usedAt: number;
  /** The webhook is gone or disabled: close once its last attempt returns. */
  dropped: boolean;
}

/**
 * The HTTP side of the dispatcher. Each webhook has a connection pool of its own (an undici Agent
 * with `connectionsPerWebhook` keep-alive connections, made on its first attempt), so a receiver
 * that hangs uses up its own connections only, whoever else shares its host. The lanes run at most
 * as many attempts of one webhook as it has connections, so an attempt never queues for a
 * connection; should one, the time-out still counts from the moment the request is sent (see
 * `waitMs` in shared/net/outbound.ts), and connecting is bounded by the same time-out on its own.
 *
 * Bounds on one node: at most `maxPools` pools are open (the least recently used idle one is closed
 * to make room), a pool unused for POOL_IDLE_MS is closed, a connection idle for KEEP_ALIVE_MS too;
 * connections in use are bounded by the lanes' total of attempts at once. Every pool is made by
 * `outboundAgent`, so the SSRF guard checks every connection's address.
 */
export class Sender {
  /** By webhook id, least recently used first. */
  private readonly pools = new Map<string, Pool>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly timeoutMs: number,
    private readonly allowPrivate: boolean,
    private readonly connectionsPerWebhook: number,
    private readonly maxPools: number,
    private readonly idleMs = POOL_IDLE_MS,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, idleMs / 2));
    this.sweeper.unref();
  }

  /** The longest one attempt can take: waiting for a connection, then the answer. */
  get longestAttemptMs(): number {
    return 2 * this.timeoutMs;
  }

  /** Pools open now. */
  get open(): number {
    return this.pools.size;
  }

  async post(webhookId: string, url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const pool = this.poolOf(webhookId);
    pool.inFlight += 1;
    try {
      const res = await outbound(pool.agent, url, {
        method: "POST",
        headers,
        body,
        timeoutMs: this.timeoutMs,
        waitMs: this.timeoutMs,
        keep: ATTEMPT_RESPONSE_LIMITS.bodyBytes,
        capture: true,
      });
      if (!res.answered) return { status_code: null, duration_ms: res.ms, error: res.error };
      const ok = res.status >= 200 && res.status < 300;
      return {
        status_code: res.status,
        duration_ms: res.ms,
        error: ok ? null : `the receiver answered ${res.status}`,
        response: responseOf(res.headers ?? {}, res.head ?? Buffer.alloc(0), res.bytes),
      };
    } finally {
      pool.inFlight -= 1;
      pool.usedAt = Date.now();
      if (pool.dropped && pool.inFlight === 0) this.closePool(webhookId, pool);
    }
  }

  /** The webhook was deleted or disabled: its pool closes (once its attempts in flight return). */
  drop(webhookId: string): void {
    const pool = this.pools.get(webhookId);
    if (!pool) return;
    pool.dropped = true;
    if (pool.inFlight === 0) this.closePool(webhookId, pool);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const agents = [...this.pools.values()].map((p) => p.agent);
    this.pools.clear();
    await Promise.all(agents.map((a) => a.close()));
  }

  private poolOf(webhookId: string): Pool {
    let pool = this.pools.get(webhookId);
    if (pool && !pool.dropped) {
      // Most recently used last, so eviction finds the stalest first.
      this.pools.delete(webhookId);
      this.pools.set(webhookId, pool);
      return pool;
    }
    if (this.pools.size >= this.maxPools) {
      for (const [id, other] of this.pools) {
        if (other.inFlight === 0) {
          this.closePool(id, other);
          break;
        }
      }
    }
    const agent = outboundAgent(this.allowPrivate, {
      connections: this.connectionsPerWebhook,
      connectTimeoutMs: this.timeoutMs,
      keepAliveMs: KEEP_ALIVE_MS,
    });
    pool = { agent, inFlight: 0, usedAt: Date.now(), dropped: false };
    this.pools.set(webhookId, pool);
    return pool;
  }

  private closePool(webhookId: string, pool: Pool): void {
    if (this.pools.get(webhookId) === pool) this.pools.delete(webhookId);
    // Closing waits for nothing in flight here; a failure to close leaves sockets to their keep-alive end.
    pool.agent.close().catch(() => undefined);
  }

  private sweep(): void {
    const stale = Date.now() - this.idleMs;
    for (const [id, pool] of this.pools) if (pool.inFlight === 0 && pool.usedAt < stale) this.closePool(id, pool);
  }
}
