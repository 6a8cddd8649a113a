import { createServer } from "node:http";

/**
 * The benchmark's webhook receiver, in a process of its own: answers every POST 200 at once and
 * records, per delivery, the time from the `sent` stamp in the event's data to the arrival.
 * The parent talks to it over IPC: "reset", then "stats" → counts and latencies.
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
    const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id: string; data?: { sent?: number } };
    seen.add(event.id);
    if (typeof event.data?.sent === "number") latencies.push(at - event.data.sent);
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
  } else if (msg === "stats") {
    process.send?.({ count, unique: seen.size, first, last, latencies });
  }
});
