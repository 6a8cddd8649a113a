import { Discoverers } from "moleculer";

/** How often the registry looks for nodes whose heartbeats stopped. */
const CHECK_MS = 250;

/**
 * Moleculer's registry, with dead nodes found on time. Its own check runs once per
 * `heartbeatTimeout`, on heartbeat times rounded to whole seconds, so a dead node can stay listed
 * for nearly twice the time-out. This one checks four times a second, on the millisecond each
 * heartbeat arrived, so a node is dropped within a quarter of a second of its time-out
 * (test/integration/heartbeat.test.ts prints the figures; docs/benchmarks.md keeps them).
 */
export class PromptDiscoverer extends Discoverers.Local {
  private readonly heardAt = new Map<string, number>();

  override startHeartbeatTimers(): void {
    super.startHeartbeatTimers();
    if (!this.checkNodesTimer) return;
    clearInterval(this.checkNodesTimer);
    this.checkNodesTimer = setInterval(() => this.checkRemoteNodes(), CHECK_MS);
    this.checkNodesTimer.unref();
  }

  override heartbeatReceived(nodeID: string, payload: Record<string, any>): void {
    this.heardAt.set(nodeID, Date.now());
    super.heartbeatReceived(nodeID, payload);
  }

  override checkRemoteNodes(): void {
    const opts = (this as unknown as { opts: { disableHeartbeatChecks?: boolean; heartbeatTimeout: number } }).opts;
    if (opts.disableHeartbeatChecks) return;
    const now = Date.now();
    for (const node of this.registry.nodes.toArray()) {
      if (node.local || !node.available) continue;
      const heard = this.heardAt.get(node.id);
      // Known but not heard from yet (its INFO came first): the timeout counts from now.
      if (heard === undefined) {
        this.heardAt.set(node.id, now);
        continue;
      }
      if (now - heard > opts.heartbeatTimeout * 1000) {
        this.logger.warn(`Heartbeat is not received from '${node.id}' node.`);
        this.heardAt.delete(node.id);
        this.registry.nodes.disconnected(node.id, true);
      }
    }
  }
}
