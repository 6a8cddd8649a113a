import { Transporters } from "moleculer";
import type { NatsAuth } from "../config";

/**
 * The NATS client's options for a TRANSPORTER URL (one or several, comma-separated) and the
 * credentials and TLS files from the settings. Credentials in the URL (`nats://user:pass@host`)
 * are used when the settings give none. The URL is not handed to Moleculer as `url`: it would
 * replace `user` and `pass` with the URL's (none) when it connects.
 */
export function natsOptions(transporter: string, auth: NatsAuth): Record<string, unknown> {
  const urls = transporter.split(",").map((u) => new URL(u.trim()));
  const fromUrl = urls.find((u) => u.username !== "");
  const user = auth.user ?? (fromUrl && decodeURIComponent(fromUrl.username));
  const pass = auth.user !== undefined ? auth.password : fromUrl?.password ? decodeURIComponent(fromUrl.password) : undefined;
  return {
    servers: urls.map((u) => u.host),
    ...(auth.token !== undefined ? { token: auth.token } : user !== undefined && { user, pass }),
    ...(auth.tls && { tls: auth.tls }),
    // A lost connection is retried twice a second, for ever; a silent one is noticed within about 15 s.
    reconnectTimeWait: 500,
    pingInterval: 5_000,
    maxPingOut: 2,
  };
}

/** What a node knows of its own link to nats-server (see BatchingNatsTransporter.link). */
export interface BusLink {
  /** How long nothing has come from nats-server: no packet, no answer to a ping. */
  silentMs(now?: number): number;
  /** Counts the connections made: it changes on every reconnect (packets sent meanwhile were lost to this node). */
  readonly generation: number;
}

/** While idle, a node pings nats-server this often, so a silent link shows within the bound. */
const PROBE_MS = 500;

/**
 * Moleculer's NATS transporter, with outgoing packets written in batches.
 *
 * The nats client writes everything published within one microtask in one socket write. But a
 * gateway publishes each request from its own HTTP read, and a service node answers each request
 * when its own store read completes, so nearly every packet costs a write syscall here, a read
 * and a write in nats-server, and a read in the receiver: under load, about a third of a node's
 * CPU went to those writes. Packets published during one turn of the event loop are held until
 * its check phase (`setImmediate`), then published together, in order, and leave in one write.
 * The wait is at most the rest of the current turn: no timer, no added latency when idle.
 */
export class BatchingNatsTransporter extends Transporters.NATS implements BusLink {
  private pending: { topic: string; data: Buffer }[] = [];
  private heardAt = Date.now();
  private probing = false;
  private probe: NodeJS.Timeout | undefined;
  generation = 0;

  /**
   * Moleculer's NATS transporter never learns of the client's own reconnects: nothing is
   * re-announced and `$transporter.connected` is not emitted, so a gateway kept identities that
   * were revoked while it was away. Every reconnect now counts (`generation`, read by the gateway
   * on each request) and runs Moleculer's own after-connect (INFO, DISCOVER, the event).
   */
  override async connect(): Promise<void> {
    await super.connect();
    this.generation += 1;
    this.heardAt = Date.now();
    const client = this.client as { status(): AsyncIterable<{ type: string }>; flush(): Promise<void>; isClosed(): boolean };
    void (async () => {
      for await (const s of client.status()) {
        if (s.type !== "reconnect") continue;
        this.generation += 1;
        this.heardAt = Date.now();
        this.logger.info("NATS client reconnected: announcing this node again");
        this.onConnected(true).catch((err: Error) => this.logger.warn("after reconnecting", err.message));
      }
    })();
    this.probe = setInterval(() => {
      if (this.probing || client.isClosed() || Date.now() - this.heardAt < PROBE_MS) return;
      this.probing = true;
      client.flush().then(
        () => {
          this.probing = false;
          this.heardAt = Date.now();
        },
        () => (this.probing = false),
      );
    }, PROBE_MS);
    this.probe.unref();
  }

  override receive(cmd: string, data: Buffer): Promise<void> | void {
    this.heardAt = Date.now();
    return super.receive(cmd, data);
  }

  silentMs(now = Date.now()): number {
    return Math.max(0, now - this.heardAt);
  }

  override send(topic: string, data: Buffer): Promise<void> {
    if (this.pending.push({ topic, data }) === 1) setImmediate(() => this.publishPending());
    return Promise.resolve();
  }

  override async disconnect(): Promise<void> {
    clearInterval(this.probe);
    // The goodbye packet and any answers still held go out before the connection closes.
    this.publishPending();
    return super.disconnect();
  }

  private publishPending(): void {
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    for (const { topic, data } of batch) {
      try {
        void super.send(topic, data);
      } catch (err) {
        // A closed connection throws here, outside any caller: the packet is lost like one sent to
        // a dead node (its request times out), and must not end the process.
        this.logger.warn(`NATS publish to '${topic}' failed`, (err as Error).message);
      }
    }
  }
}
