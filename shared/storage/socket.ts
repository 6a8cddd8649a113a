import { existsSync, rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { join } from "node:path";
import { ApiError } from "../errors";
import { applyMessage, type StoreMessage } from "./apply";
import { RemoteStore } from "./remote";
import type { Store } from "./types";

/**
 * The embedded store's owner also listens on `DATA_DIR/store.sock`, so the bootstrap CLI can work
 * while the server runs (contract section 2). The protocol is newline-delimited JSON: a request
 * `{id, message}` (a `StoreMessage`), its answer `{id, result}` or `{id, error}`; ids let a client
 * have many requests in flight on one connection.
 */

// sockaddr_un holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH_BYTES = 107;

export const socketPath = (dataDir: string): string => join(dataDir, "store.sock");

interface Request {
  id: number;
  message: StoreMessage;
}

interface WireError {
  name?: string;
  message?: string;
  code?: unknown;
  type?: unknown;
  data?: unknown;
  retryable?: unknown;
}

interface Reply {
  id: number;
  result?: unknown;
  error?: WireError;
}

function usable(path: string): boolean {
  return Buffer.byteLength(path) <= MAX_SOCKET_PATH_BYTES;
}

function onLines(socket: Socket, handle: (line: string) => void): void {
  let buffered = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      if (line) handle(line);
    }
  });
}

export interface SocketServer {
  readonly path: string;
  /** Stops listening, drops connected clients and removes the socket file. */
  close(): Promise<void>;
}

/** Serves `store` on `DATA_DIR/store.sock`; undefined when that path is too long for a unix socket. */
export async function serveSocket(store: Store, dataDir: string): Promise<SocketServer | undefined> {
  const path = socketPath(dataDir);
  if (!usable(path)) return undefined;
  // Only the lock holder gets here, so a socket file left behind is a dead owner's.
  rmSync(path, { force: true });
  const clients = new Set<Socket>();
  const server = createServer((socket) => {
    clients.add(socket);
    socket.on("close", () => clients.delete(socket));
    socket.on("error", () => socket.destroy());
    onLines(socket, (line) => {
      let request: Request;
      try {
        request = JSON.parse(line) as Request;
      } catch {
        // Not this protocol: nothing can be answered without an id.
        socket.destroy();
        return;
      }
      void applyMessage(store, request.message).then(
        (result) => ({ id: request.id, result }),
        (err: WireError) => ({
          id: request.id,
          error: { name: err.name, message: err.message, code: err.code, type: err.type, data: err.data, retryable: err.retryable },
        }),
      ).then((reply: Reply) => {
        if (!socket.destroyed) socket.write(`${JSON.stringify(reply)}\n`);
      });
    });
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(path, () => {
      server.off("error", fail);
      ok();
    });
  });
  return {
    path,
    close: () =>
      new Promise<void>((done) => {
        for (const client of clients) client.destroy();
        // Node removes the socket file when a unix-socket server closes.
        server.close(() => done());
      }),
  };
}

/** Errors arrive as plain fields; callers match on `type`/`code`, as after a broker hop. */
function restore(wire: WireError): Error {
  return Object.assign(new Error(wire.message ?? "storage error"), wire);
}

/** A store reached through a running owner's socket, or undefined when no owner answers there. */
export async function connectSocket(dataDir: string): Promise<RemoteStore | undefined> {
  const path = socketPath(dataDir);
  if (!usable(path) || !existsSync(path)) return undefined;
  const socket = await new Promise<Socket | undefined>((ok) => {
    const s = connect(path);
    s.once("connect", () => ok(s));
    // A file left by an owner that died: nobody listens.
    s.once("error", () => ok(undefined));
  });
  if (!socket) return undefined;

  let next = 0;
  let gone: Error | undefined;
  const pending = new Map<number, { ok: (value: unknown) => void; fail: (err: unknown) => void }>();
  socket.on("error", () => undefined);
  socket.on("close", () => {
    gone = new ApiError("service_unavailable", "The store's owner closed its socket", { retry_after: 1 });
    for (const waiter of pending.values()) waiter.fail(gone);
    pending.clear();
  });
  onLines(socket, (line) => {
    const reply = JSON.parse(line) as Reply;
    const waiter = pending.get(reply.id);
    if (!waiter) return;
    pending.delete(reply.id);
    if (reply.error) waiter.fail(restore(reply.error));
    else waiter.ok(reply.result);
  });

  return new RemoteStore(
    (message) =>
      new Promise((ok, fail) => {
        if (gone) return fail(gone);
        const id = (next += 1);
        pending.set(id, { ok, fail });
        socket.write(`${JSON.stringify({ id, message } satisfies Request)}\n`);
      }),
    () =>
      new Promise<void>((done) => {
        if (socket.destroyed) return done();
        socket.once("close", () => done());
        socket.end();
      }),
  );
}
