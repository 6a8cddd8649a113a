import { Transporters } from "moleculer";

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
export class BatchingNatsTransporter extends Transporters.NATS {
  private pending: { topic: string; data: Buffer }[] = [];

  override send(topic: string, data: Buffer): Promise<void> {
    if (this.pending.push({ topic, data }) === 1) setImmediate(() => this.publishPending());
    return Promise.resolve();
  }

  override async disconnect(): Promise<void> {
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
