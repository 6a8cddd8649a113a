import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { outbound, outboundAgent, READ_LIMIT } from "../../../../shared/net/outbound";
import { waitFor } from "../../../../tools/procs";

describe("outbound, at send time", () => {
  let server: Server;
  let port: number;
  let hits = 0;
  /** Bytes /endless wrote, and whether its socket has closed. */
  const endless = { written: 0, closed: false };
  beforeAll(async () => {
    server = createServer((req, res) => {
      hits += 1;
      // /endless: a body that never ends, written as fast as the client reads it.
      if (req.url === "/endless") {
        res.writeHead(200, { "content-type": "application/json" });
        const chunk = Buffer.alloc(16_384, "y");
        const more = () => {
          while (!res.destroyed && res.write(chunk)) endless.written += chunk.length;
        };
        res.on("drain", more);
        (req.socket as Socket).on("close", () => (endless.closed = true));
        return more();
      }
      // /big/<n>: n bytes of "x", in 16 KiB writes; /slow: headers at once, the body never.
      const big = /^\/big\/(\d+)$/.exec(req.url ?? "");
      if (big) {
        res.writeHead(201, { "content-type": "text/plain", "x-seen": "yes" });
        for (let left = Number(big[1]); left > 0; left -= 16_384) res.write("x".repeat(Math.min(left, 16_384)));
        return res.end();
      }
      if (req.url === "/slow") return res.writeHead(200).write("partial");
      res.end("ok");
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  const req = { method: "POST" as const, headers: {}, body: "{}", timeoutMs: 2000, keep: 0 };

  it("refuses an IP-literal private target (no lookup happens for it) unless private targets are allowed", async () => {
    const strict = outboundAgent(false);
    const refused = await outbound(strict, `http://127.0.0.1:${port}/`, req);
    expect(refused).toMatchObject({ answered: false, error: "target address not allowed: the host is a private address" });
    const mapped = await outbound(strict, `http://[::ffff:127.0.0.1]:${port}/`, req);
    expect(mapped).toMatchObject({ answered: false });
    expect(hits).toBe(0);
    await strict.close();

    const open = outboundAgent(true);
    expect(await outbound(open, `http://127.0.0.1:${port}/`, req)).toMatchObject({ answered: true, status: 200 });
    expect(hits).toBe(1);
    await open.close();
  });

  it("names no address when a name resolves inward at connect time", async () => {
    const strict = outboundAgent(false);
    const res = await outbound(strict, `http://localhost:${port}/`, req);
    expect(res.answered).toBe(false);
    if (!res.answered) {
      expect(res.error).toBe("target address not allowed: localhost resolves to a private address");
      expect(res.error).not.toMatch(/127\.0\.0\.1|::1/);
    }
    await strict.close();
  });

  it("keeps the first `keep` bytes and the answer's length, reading at most 64 KiB of it", async () => {
    const open = outboundAgent(true);
    const url = (n: number) => `http://127.0.0.1:${port}/big/${n}`;
    try {
      const kept = await outbound(open, url(100_000), { ...req, keep: 10 });
      expect(kept).toMatchObject({ answered: true, status: 201, contentType: "text/plain", text: "x".repeat(10), cut: true });
      // Read past 64 KiB, then dropped (no Content-Length): the length known is what was read.
      if (!kept.answered) throw new Error("not answered");
      expect(kept.bytes).toBeGreaterThan(READ_LIMIT);
      expect(kept.bytes).toBeLessThan(100_000);
      const captured = await outbound(open, url(100_000), { ...req, keep: 10, capture: true });
      expect(captured).toMatchObject({ answered: true, status: 201, text: "" });
      if (!captured.answered) throw new Error("not answered");
      expect(captured.head?.toString()).toBe("x".repeat(10));
      expect(captured.headers?.["x-seen"]).toBe("yes");
      // Read past 64 KiB, then dropped: the length known is what was read.
      expect(captured.bytes).toBeGreaterThan(64 * 1024);
      expect(captured.bytes).toBeLessThan(100_000);
      expect(await outbound(open, url(5), { ...req, keep: 0 })).toMatchObject({
        answered: true,
        status: 201,
        text: "",
        bytes: 0,
        cut: false,
      });
      expect(await outbound(open, url(5), { ...req, keep: 10 })).toMatchObject({ text: "xxxxx", bytes: 5, cut: false });
    } finally {
      await open.destroy();
    }
  });

  it("reads an endless answer up to its cap, then destroys the connection rather than draining it", async () => {
    const open = outboundAgent(true);
    try {
      const limit = 32 * 1024;
      const res = await outbound(open, `http://127.0.0.1:${port}/endless`, { ...req, method: "GET", timeoutMs: 10_000, keep: 100, limit });
      expect(res).toMatchObject({ answered: true, status: 200, cut: true, text: "y".repeat(100) });
      if (!res.answered) throw new Error("not answered");
      // Done long before the time-out: at the cap, not at the 10 s.
      expect(res.ms).toBeLessThan(5_000);
      expect(res.bytes).toBeGreaterThan(limit);
      await waitFor("the server to see its connection closed", () => endless.closed, 5_000);
      // Not drained: the server wrote the cap plus what the sockets' buffers held, not the gigabytes
      // a read until the time-out takes.
      expect(endless.written).toBeLessThan(64 * 1024 * 1024);
      console.log(`an endless answer, cap ${limit} B: read ${res.bytes} B in ${res.ms} ms; the server wrote ${endless.written} B`);
    } finally {
      await open.destroy();
    }
  });

  it("times out an answer whose body stops coming, and names the time-out", async () => {
    const open = outboundAgent(true);
    try {
      const res = await outbound(open, `http://127.0.0.1:${port}/slow`, { ...req, timeoutMs: 300, keep: 100 });
      expect(res).toMatchObject({ answered: false, error: "no answer within 300 ms" });
      expect(res.ms).toBeGreaterThanOrEqual(250);
    } finally {
      await open.destroy();
    }
  });
});
