import { existsSync, rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { applyMessage, type StoreMessage } from "./apply";
import { RemoteStore } from "./remote";
import type { Store } from "./types";

/** Unix socket paths are limited to about 107 bytes. */
const MAX_SOCKET_PATH = 100;

export const socketPath = (dataDir: string): string => join(dataDir, "store.sock");

interface Reply {
  id: number;
  result?: unknown;
  error?: { name: string; message: string; type?: unknown; code?: unknown; data?: unknown };
}

/** Reads newline-delimited JSON from a socket. */
function lines(socket: Socket, onLine: (line: string) => void): void {
  let buffered = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line) onLine(line);
    }
  });
}

/**
 * Serves the owner's store on `DATA_DIR/store.sock`, so the bootstrap CLI can work while the server
 * runs. Returns undefined when the path is too long for a unix socket.
 */
export async function serveSocket(store: Store, dataDir: string): Promise<Server | undefined> {
  const path = socketPath(dataDir);
  if (path.length > MAX_SOCKET_PATH) return undefined;
  if (existsSync(path)) rmSync(path);
  const server = createServer((socket) => {
    socket.on("error", () => socket.destroy());
    lines(socket, (line) => {
      let id = -1;
      void (async () => {
        const reply: Reply = { id };
        try {
          const req = JSON.parse(line) as { id: number; msg: StoreMessage };
          reply.id = id = req.id;
          reply.result = (await applyMessage(store, req.msg)) ?? null;
        } catch (err) {
          const e = err as Error & { type?: unknown; code?: unknown; data?: unknown };
          reply.error = { name: e.name, message: e.message, type: e.type, code: e.code, data: e.data };
        }
        if (!socket.destroyed) socket.write(`${JSON.stringify(reply)}\n`);
      })();
    });
  });
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(path, () => ok());
  });
  return server;
}

/** A store reached through a running owner's socket, or undefined when no owner answers. */
export async function connectSocket(dataDir: string): Promise<Store | undefined> {
  const path = socketPath(dataDir);
  if (!existsSync(path)) return undefined;
  const socket = await new Promise<Socket | undefined>((ok) => {
    const s = connect(path);
    s.once("connect", () => ok(s));
    s.once("error", () => ok(undefined));
  });
  if (!socket) return undefined;
  let next = 0;
  const waiting = new Map<number, { ok: (v: unknown) => void; fail: (e: unknown) => void }>();
  lines(socket, (line) => {
    const reply = JSON.parse(line) as Reply;
    const w = waiting.get(reply.id);
    if (!w) return;
    waiting.delete(reply.id);
    if (reply.error) w.fail(Object.assign(new Error(reply.error.message), reply.error));
    else w.ok(reply.result);
  });
  socket.on("close", () => {
    for (const w of waiting.values()) w.fail(new Error("the store socket closed"));
    waiting.clear();
  });
  return new RemoteStore(
    (msg) =>
      new Promise((ok, fail) => {
        const id = (next += 1);
        waiting.set(id, { ok, fail });
        socket.write(`${JSON.stringify({ id, msg })}\n`);
      }),
    async () => void socket.end(),
  );
}
