import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { Webhook } from "standardwebhooks";

/**
 * A real webhook receiver for the tests, on 127.0.0.1. It verifies every delivery the way the docs
 * tell receivers to: the spec's `Service-Signature` recomputed and compared in constant time, and the
 * Standard Webhooks headers with the `standardwebhooks` library. It records everything, and answers
 * as each path is told to (fail, be slow, never answer).
 */
export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  json: any;
  at: number;
  serviceSignatureOk: boolean;
  standardSignatureOk: boolean;
  /** Both signatures verify. */
  verified: boolean;
  /** Which connection carried it (numbered in order of arrival). */
  connection: number;
  /** The sender's port on that connection. */
  fromPort: number;
  /** When it ended (ms since the epoch): answered, or its connection closed first; unset while open. */
  endedAt?: number;
  /** Whether the answer was written in full before it ended (false: the sender went away first). */
  answered?: boolean;
}

export interface Behaviour {
  status?: number;
  delayMs?: number;
  /** Never answer: keep the socket open until the client gives up. */
  hang?: boolean;
  /** The answer's body and extra headers (default: "ok"/"no" as text/plain). */
  body?: string | Buffer;
  headers?: Record<string, string>;
  /** Answer once this settles (a gate the test opens). */
  gate?: Promise<unknown>;
  /** Accept a request whose Standard Webhooks signature verifies (a workflow's http step sends no `Service-Signature`). */
  standardOnly?: boolean;
}

export interface Receiver {
  url(path?: string): string;
  readonly port: number;
  /** The secrets valid on `path` (several during a rotation). */
  setSecret(path: string, secret: string | string[]): void;
  behave(path: string, behaviour: (n: number) => Behaviour): void;
  readonly requests: Received[];
  /** When a connection closed (ms since the epoch), if it has. */
  closedAt(connection: number): number | undefined;
  byPath(path: string): Received[];
  /** Resolves when `check` holds (polled), or rejects with what was received. */
  waitFor(check: () => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** As the docs tell receivers: the header is a list during a rotation; any element that matches will do. */
function serviceOk(secrets: string[], body: string, header: string | undefined): boolean {
  if (!header) return false;
  const given = header.split(",").map((v) => Buffer.from(v.trim()));
  return secrets.some((secret) => {
    const expected = Buffer.from(`sha256=${createHmac("sha256", secret).update(body).digest("hex")}`);
    return given.some((g) => expected.length === g.length && timingSafeEqual(expected, g));
  });
}

function standardOk(secrets: string[], body: string, headers: Record<string, string>): boolean {
  return secrets.some((secret) => {
    try {
      new Webhook(secret).verify(body, headers);
      return true;
    } catch {
      return false;
    }
  });
}

export async function startReceiver(): Promise<Receiver> {
  const requests: Received[] = [];
  const secrets = new Map<string, string[]>();
  const behaviours = new Map<string, (n: number) => Behaviour>();
  const counts = new Map<string, number>();
  const sockets = new Set<Socket>();
  const connectionOf = new WeakMap<Socket, number>();
  const closed = new Map<number, number>();
  let connections = 0;
  const timers = new Set<NodeJS.Timeout>();

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0];
      const body = Buffer.concat(chunks).toString("utf8");
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(", ") : String(v);
      const valid = secrets.get(path) ?? [];
      const serviceSignatureOk = serviceOk(valid, body, headers["service-signature"]);
      const standardSignatureOk = standardOk(valid, body, headers);
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const connection = connectionOf.get(req.socket) ?? -1;
      const fromPort = req.socket.remotePort ?? -1;
      const received: Received = {
        path,
        headers,
        body,
        json,
        at: Date.now(),
        serviceSignatureOk,
        standardSignatureOk,
        verified: serviceSignatureOk && standardSignatureOk,
        connection,
        fromPort,
      };
      requests.push(received);
      res.on("close", () => {
        received.endedAt = Date.now();
        received.answered = res.writableFinished;
      });
      const n = (counts.get(path) ?? 0) + 1;
      counts.set(path, n);
      const b = behaviours.get(path)?.(n) ?? {};
      if (b.hang) return;
      const answer = () => {
        const signed = standardSignatureOk && (serviceSignatureOk || b.standardOnly === true);
        const status = signed ? (b.status ?? 200) : 400;
        if (!res.destroyed)
          res.writeHead(status, { "content-type": "text/plain", ...b.headers }).end(b.body ?? (status < 300 ? "ok" : "no"));
      };
      if (b.gate) void b.gate.then(answer);
      else if (b.delayMs) {
        const t = setTimeout(() => {
          timers.delete(t);
          answer();
        }, b.delayMs);
        timers.add(t);
      } else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    const n = ++connections;
    connectionOf.set(s, n);
    s.on("close", () => {
      sockets.delete(s);
      closed.set(n, Date.now());
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const port = (server.address() as { port: number }).port;

  return {
    url: (path = "/hook") => `http://127.0.0.1:${port}${path}`,
    port,
    setSecret(path, secret) {
      secrets.set(path, Array.isArray(secret) ? secret : [secret]);
    },
    behave(path, behaviour) {
      behaviours.set(path, behaviour);
    },
    requests,
    closedAt: (connection) => closed.get(connection),
    byPath: (path) => requests.filter((r) => r.path === path),
    async waitFor(check, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > until) {
          const seen = requests.map((r) => `${r.path} ${r.json?.type ?? "?"} ${r.headers["service-delivery"]} verified=${r.verified}`);
          throw new Error(
            `receiver: condition not met within ${timeoutMs} ms; received ${requests.length}:\n${seen.slice(-30).join("\n")}`,
          );
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
