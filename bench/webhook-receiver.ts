import { createServer } from "node:http";

/**
 * The benchmarks' receiver, in a process of its own: answers every request 200 at once and records,
 * per delivery (or workflow http step), the time from its `sent` stamp to the arrival.
 * The parent talks to it over IPC: "reset", then "count" → unique deliveries, "stats" → counts and latencies.
 *
 *   node dist/bench/webhook-receiver.js <port>
 */
const now = (): number => performance.timeOrigin + performance.now();

let count = 0;
let first = 0;
let last = 0;
const seen = new Set<string>();
let latencies: number[] = [];

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const at = now();
    count += 1;
    if (first === 0) first = at;
    last = at;
    // A delivery: the event's id and `data.sent`. A workflow's http step: `?id=…&sent=…`.
    const text = Buffer.concat(chunks).toString("utf8");
    const query = new URL(req.url ?? "/", "http://x").searchParams;
    const event = (text ? JSON.parse(text) : { id: query.get("id"), data: { sent: Number(query.get("sent")) } }) as {
      id: string;
      data?: { sent?: number };
    };
    seen.add(event.id);
    if (typeof event.data?.sent === "number" && event.data.sent > 0) latencies.push(at - event.data.sent);
    res.writeHead(200, { "content-type": "text/plain", "content-length": 2 }).end("ok");
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2]), "127.0.0.1", () => process.send?.({ ready: true }));

process.on("message", (msg: string) => {
  if (msg === "reset") {
    count = 0;
    first = 0;
    last = 0;
    seen.clear();
    latencies = [];
    process.send?.({ reset: true });
  } else if (msg === "count") {
    process.send?.({ unique: seen.size });
  } else if (msg === "stats") {
    process.send?.({ count, unique: seen.size, first, last, latencies });
  }
});
