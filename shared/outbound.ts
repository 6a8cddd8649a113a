import { Agent, request, type Dispatcher } from "undici";
import { isIP } from "node:net";
import { guardedLookup, isPrivateAddress } from "./net-guard";

/**
 * Requests the platform makes to its users' servers (webhook deliveries, workflow http steps):
 * keep-alive connections through undici, the SSRF guard applied again to the address actually
 * connected to, no redirects, one time-out for the whole exchange, and failures in words a user
 * reads in a delivery log or a run's step.
 */
export function outboundAgent(
  allowPrivate: boolean,
  opts: { connections?: number; connectTimeoutMs?: number; keepAliveMs?: number } = {},
): Agent {
  const agent = new Agent({
    ...(opts.connections !== undefined && { connections: opts.connections }),
    keepAliveTimeout: opts.keepAliveMs ?? 30_000,
    connect: { lookup: guardedLookup(allowPrivate), ...(opts.connectTimeoutMs !== undefined && { timeout: opts.connectTimeoutMs }) },
  });
  if (allowPrivate) privateAllowed.add(agent);
  return agent;
}

/** Agents made with `allowPrivate`; any other agent gets the address rule on IP literals too. */
const privateAllowed = new WeakSet<Agent>();

/**
 * A socket to an IP literal never asks `lookup`, so the guard must look at the URL itself: a target
 * stored while private targets were allowed is refused once the setting says otherwise.
 */
function literalRefused(agent: Agent, url: string): boolean {
  if (privateAllowed.has(agent)) return false;
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  if (host.startsWith("[")) host = host.slice(1, -1);
  return isIP(host) !== 0 && isPrivateAddress(host);
}

export interface OutboundRequest {
  method: Dispatcher.HttpMethod;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  /**
   * When set, `timeoutMs` counts from the moment the request is written to a connection, and the
   * wait for one (connecting included) is bounded by `waitMs` on its own: time spent queued behind
   * the same pool's busy connections is not charged to the receiver.
   */
  waitMs?: number;
  /** Bytes of the answer to keep as text (0: read and drop it). */
  keep: number;
  /** Keep those bytes as they came (`head`) rather than as text, and the answer's headers (a delivery log's attempt). */
  capture?: boolean;
}

/** How much of an answer is read at most; past it the connection is dropped rather than drained. */
const READ_LIMIT = 64 * 1024;

export type OutboundResult =
  /** `bytes`: the body's whole length, `text` its first `keep` bytes (counted only when `keep` > 0). */
  | {
      answered: true;
      status: number;
      contentType: string;
      text: string;
      bytes: number;
      ms: number;
      /** With `capture`: the first `keep` bytes, and the headers as undici gives them. */
      head?: Buffer;
      headers?: Record<string, string | string[] | undefined>;
    }
  | { answered: false; error: string; ms: number };

/**
 * Time-outs that fall due together (a hanging receiver's whole pool, its requests sent at once) are
 * carried out ABORTS_PER_TURN at a time, a batch per turn of the event loop. Aborting a request
 * (its socket destroyed, its error built) costs a fraction of a millisecond, so hundreds at once
 * held the loop for a few hundred ms, and with it every other request of the process: another
 * webhook's delivery, an API call. Spread, they cost the others a few ms each turn.
 */
const ABORTS_PER_TURN = 16;
const aborting: (() => void)[] = [];
function abortSoon(abort: () => void): void {
  aborting.push(abort);
  if (aborting.length === 1) setImmediate(abortSome);
}
function abortSome(): void {
  for (const abort of aborting.splice(0, ABORTS_PER_TURN)) abort();
  if (aborting.length > 0) setImmediate(abortSome);
}

export async function outbound(agent: Agent, url: string, req: OutboundRequest): Promise<OutboundResult> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  if (literalRefused(agent, url)) return { answered: false, error: "target address not allowed: the host is a private address", ms: ms() };
  const abort = new AbortController();
  let timedOut: "wait" | "answer" | undefined;
  const expire = (phase: "wait" | "answer", after: number) =>
    setTimeout(
      () =>
        abortSoon(() => {
          timedOut = phase;
          abort.abort();
        }),
      after,
    );
  let timer = expire(req.waitMs === undefined ? "answer" : "wait", req.waitMs ?? req.timeoutMs);
  const onSent = () => {
    clearTimeout(timer);
    timer = expire("answer", req.timeoutMs);
  };
  try {
    const res = await request(url, {
      dispatcher: req.waitMs === undefined ? agent : clockedAt(agent, onSent),
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: abort.signal,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
    });
    let text = "";
    let size = 0;
    let head: Buffer | undefined;
    if (req.keep > 0) {
      const chunks: Buffer[] = [];
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (size < req.keep) chunks.push(chunk.subarray(0, req.keep - size));
        size += chunk.length;
        // A captured answer is read as far as a dropped one would be (its length past that is not known).
        if (req.capture && size > READ_LIMIT) break;
      }
      head = Buffer.concat(chunks);
      if (!req.capture) text = head.toString("utf8");
    } else {
      await res.body.dump({ limit: READ_LIMIT });
    }
    const contentType = String(res.headers["content-type"] ?? "");
    return {
      answered: true,
      status: res.statusCode,
      contentType,
      text,
      bytes: size,
      ms: ms(),
      ...(req.capture && { head, headers: res.headers }),
    };
  } catch (err) {
    if (timedOut === "wait") return { answered: false, error: `no connection within ${req.waitMs} ms`, ms: ms() };
    return { answered: false, error: describeFailure(err, timedOut === "answer", req.timeoutMs), ms: ms() };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The agent, telling `onSent` when a request of this call is written to a connection (undici's
 * `onRequestStart`, called once the request leaves the pool's queue for a socket).
 */
function clockedAt(agent: Agent, onSent: () => void): Dispatcher {
  const dispatch = (opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean =>
    agent.dispatch(
      opts,
      new Proxy(handler, {
        get(target, key, receiver) {
          const value: unknown = Reflect.get(target, key, receiver);
          if (key === "onRequestStart" && typeof value === "function") {
            return (...args: unknown[]) => {
              onSent();
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            };
          }
          return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      }),
    );
  return Object.assign(Object.create(agent) as Agent, { dispatch });
}

function describeFailure(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e.cause?.code ?? e.code;
  if (code === "ERR_URL_NOT_ALLOWED") return e.cause?.message ?? e.message ?? "target address not allowed";
  if (code === "ECONNREFUSED") return "connection refused";
  if (code === "ENOTFOUND") return "the host name does not resolve";
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT" || code === "UND_ERR_CONNECT_TIMEOUT") {
    return `no answer within ${timeoutMs} ms`;
  }
  return `${code ?? "error"}: ${e.cause?.message ?? e.message ?? String(err)}`.slice(0, 300);
}
