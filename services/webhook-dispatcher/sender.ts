import type { Agent } from "undici";
import { outbound, outboundAgent } from "../../shared/outbound";

export interface SendResult {
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

/**
 * The HTTP side of the dispatcher: keep-alive connections per receiver (undici, about 5x the
 * requests per second of global fetch here), one time-out for the whole attempt, and the SSRF guard
 * at connect time (see shared/outbound.ts). The receiver's answer is read and dropped.
 */
export class Sender {
  private readonly agent: Agent;

  constructor(
    private readonly timeoutMs: number,
    allowPrivate: boolean,
    connectionsPerOrigin: number,
  ) {
    this.agent = outboundAgent(allowPrivate, { connections: connectionsPerOrigin, connectTimeoutMs: timeoutMs });
  }

  async post(url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const res = await outbound(this.agent, url, { method: "POST", headers, body, timeoutMs: this.timeoutMs, keep: 0 });
    if (!res.answered) return { status_code: null, duration_ms: res.ms, error: res.error };
    const ok = res.status >= 200 && res.status < 300;
    return { status_code: res.status, duration_ms: res.ms, error: ok ? null : `the receiver answered ${res.status}` };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
