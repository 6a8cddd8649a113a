import { createServer, type ServerResponse } from "node:http";

/**
 * A real HTTP server on 127.0.0.1 that holds every request open until the test lets it go, and
 * records, per key (the first segment of the request's path), how many distinct runs (its second
 * segment, if any) had a request open at once at most: two runs of one key overlapping show as a
 * most of 2. A request whose connection closes unanswered (its node killed) is no longer open.
 */
export interface HoldTarget {
  url: string;
  /** Requests open now, per key. */
  open: Map<string, number>;
  /** The most requests open at once, per key, and overall. */
  most: Map<string, number>;
  mostOverall: number;
  /** Every request's key and run (`key/run`), in arrival order. */
  arrivals: string[];
  /** Answers every request open now (200, or `status`). */
  release(status?: number): number;
  close(): Promise<void>;
}

export async function startHoldTarget(): Promise<HoldTarget> {
  const held: { key: string; run: string; res: ServerResponse }[] = [];
  const target = { open: new Map(), most: new Map(), mostOverall: 0, arrivals: [] as string[] } as HoldTarget;
  const runsOpen = (key: string) => new Set(held.filter((h) => h.key === key).map((h) => h.run));
  const recount = () => {
    for (const key of new Set([...target.open.keys(), ...held.map((h) => h.key)])) target.open.set(key, runsOpen(key).size);
  };
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const [key, run = String(target.arrivals.length)] = (req.url ?? "/").slice(1).split("/");
      target.arrivals.push(`${key}/${run}`);
      const entry = { key, run, res };
      held.push(entry);
      recount();
      target.most.set(key, Math.max(target.open.get(key) ?? 0, target.most.get(key) ?? 0));
      target.mostOverall = Math.max(target.mostOverall, new Set(held.map((h) => `${h.key}/${h.run}`)).size);
      res.on("close", () => {
        const at = held.indexOf(entry);
        if (at >= 0) held.splice(at, 1);
        recount();
      });
    });
  });
  target.release = (status = 200) => {
    const answered = held.splice(0);
    for (const { res } of answered) res.writeHead(status, { "content-type": "application/json" }).end("{}");
    recount();
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
