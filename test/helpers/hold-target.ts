import { createServer, type ServerResponse } from "node:http";

/**
 * A real HTTP server on 127.0.0.1 that holds every request open until the test lets it go, and
 * records, per key (the request's path after `/`), how many requests were open at once at most:
 * two runs of one key overlapping show as a most of 2.
 */
export interface HoldTarget {
  url: string;
  /** Requests open now, per key. */
  open: Map<string, number>;
  /** The most requests open at once, per key, and overall. */
  most: Map<string, number>;
  mostOverall: number;
  /** Every request's key, in arrival order. */
  arrivals: string[];
  /** Answers every request open now (200). */
  release(): number;
  close(): Promise<void>;
}

export async function startHoldTarget(): Promise<HoldTarget> {
  const held: { key: string; res: ServerResponse }[] = [];
  const target = { open: new Map(), most: new Map(), mostOverall: 0, arrivals: [] as string[] } as HoldTarget;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const key = (req.url ?? "/").slice(1);
      target.arrivals.push(key);
      const n = (target.open.get(key) ?? 0) + 1;
      target.open.set(key, n);
      target.most.set(key, Math.max(n, target.most.get(key) ?? 0));
      target.mostOverall = Math.max(target.mostOverall, held.length + 1);
      held.push({ key, res });
    });
  });
  target.release = () => {
    const answered = held.splice(0);
    for (const { key, res } of answered) {
      target.open.set(key, (target.open.get(key) ?? 1) - 1);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    }
    return answered.length;
  };
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  target.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  target.close = async () => {
    target.release();
    server.closeAllConnections();
    await new Promise((ok) => server.close(ok));
  };
  return target;
}
