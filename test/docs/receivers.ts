import { spawn, type ChildProcess } from "node:child_process";
import { createHmac } from "node:crypto";
import { request } from "undici";
import { waitFor } from "../../tools/procs";

/** A receiver from the docs, run as its own process; its output is collected line by line. */
export class Receiver {
  lines: string[] = [];
  private proc: ChildProcess;
  constructor(command: string, args: string[], secret: string) {
    this.proc = spawn(command, args, { env: { ...process.env, WEBHOOK_SECRET: secret }, stdio: ["ignore", "pipe", "pipe"] });
    let buffered = "";
    const take = (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split("\n");
      buffered = parts.pop() as string;
      this.lines.push(...parts);
    };
    this.proc.stdout?.on("data", take);
    this.proc.stderr?.on("data", take);
  }
  async waitFor(pattern: RegExp): Promise<string> {
    await waitFor(`a receiver line matching ${pattern} (got ${JSON.stringify(this.lines)})`, () => this.lines.some((l) => pattern.test(l)));
    return this.lines.find((l) => pattern.test(l)) as string;
  }
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null) return;
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.kill("SIGTERM");
    await exited;
  }
}

/** A delivery signed with one secret, sent with another body or signature: the receiver must refuse it. */
export async function expectTamperedRefused(receiver: Receiver, port: number, secret: string): Promise<void> {
  const body = JSON.stringify({ id: "evt_forged", type: "order.created", created_at: new Date().toISOString(), data: {} });
  const signature = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
  const send = async (payload: string, headers: Record<string, string>) =>
    (
      await request(`http://127.0.0.1:${port}/hooks`, {
        method: "POST",
        body: payload,
        headers: { "content-type": "application/json", ...headers },
      })
    ).statusCode;
  const before = receiver.lines.filter((l) => l === "refused: bad signature").length;
  expect(await send(body.replace("order.created", "order.refunded"), { "service-signature": signature })).toBe(400);
  expect(await send(body, { "service-signature": signature.replace(/.$/, (c) => (c === "0" ? "1" : "0")) })).toBe(400);
  expect(await send(body, {})).toBe(400);
  await waitFor("three refusals", () => receiver.lines.filter((l) => l === "refused: bad signature").length === before + 3);
  expect(receiver.lines.some((l) => l.includes("evt_forged"))).toBe(false);
}
