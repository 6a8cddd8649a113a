import { createServer, type Server } from "node:http";
import { outbound, outboundAgent } from "../../../shared/outbound";

describe("outbound, at send time", () => {
  let server: Server;
  let port: number;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      hits += 1;
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
});
