import { Agent, type Dispatcher } from "undici";
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
function literalRefused(agent: Agent, hostname: string): boolean {
  if (privateAllowed.has(agent)) return false;
  const host = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
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
  /**
   * Bytes of the answer read at most (READ_LIMIT by default, never fewer than `keep`): past them
   * the connection is destroyed rather than drained, so an endless or huge answer costs its
   * reader no more than this, however long the time-out.
   */
  limit?: number;
  /** Keep those bytes as they came (`head`) rather than as text, and the answer's headers (a delivery log's attempt). */
  capture?: boolean;
}

/** How much of an answer is read at most unless a request says otherwise (see `limit`). */
export const READ_LIMIT = 64 * 1024;

export type OutboundResult =
  /**
   * `bytes`: the body's length (counted only when `keep` > 0): as declared by Content-Length, else
   * as read, which for a `cut` answer is only what was read before the connection was dropped.
   * `text`: its first `keep` bytes.
   */
  | {
      answered: true;
      status: number;
      contentType: string;
      text: string;
      bytes: number;
      /** Longer than `limit`: read that far, then the connection was destroyed. */
      cut: boolean;
      ms: number;
      /** With `capture`: the first `keep` bytes, and the headers as undici gives them. */
      head?: Buffer;
      headers?: Record<string, string | string[] | undefined>;
      /** The answer's Retry-After header, when it sent one. */
      retryAfter?: string;
    }
  | { answered: false; error: string; ms: number };

/** Origin and path of the URLs last sent to (parsed once: a URL is parsed on every request otherwise). */
const parsedUrls = new Map<string, { origin: string; path: string; hostname: string }>();
function parsed(url: string): { origin: string; path: string; hostname: string } {
  let p = parsedUrls.get(url);
  if (!p) {
    const u = new URL(url);
    p = { origin: u.origin, path: `${u.pathname}${u.search}`, hostname: u.hostname };
    if (parsedUrls.size >= 10_000) parsedUrls.clear();
    parsedUrls.set(url, p);
  }
  return p;
}

/**
 * Time-outs that fall due together (a hanging receiver's whole pool, its requests sent at once) are
 * carried out ABORTS_PER_TURN at a time, a batch per turn of the event loop: each abort destroys a
 * socket and builds an error, and hundreds in one turn would hold the loop, and with it every
 * other request of the process (another webhook's delivery, an API call).
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

/**
 * One exchange through undici's dispatcher API with a handler of its own: no response stream, no
 * abort signal and no async iterator per request (for a small answer, each weighs about as much as
 * the HTTP exchange itself), and the handler sees the moment the request leaves the pool's queue.
 */
export function outbound(agent: Agent, url: string, req: OutboundRequest): Promise<OutboundResult> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  let target: { origin: string; path: string; hostname: string };
  try {
    target = parsed(url);
  } catch (err) {
    return Promise.resolve({ answered: false, error: describeFailure(err, false, req.timeoutMs), ms: ms() });
  }
  if (literalRefused(agent, target.hostname)) {
    return Promise.resolve({ answered: false, error: "target address not allowed: the host is a private address", ms: ms() });
  }
  return new Promise<OutboundResult>((resolve) => {
    let done = false;
    let controller: Dispatcher.DispatchController | undefined;
    let timedOut: "wait" | "answer" | undefined;
    let status = 0;
    let headers: Record<string, string | string[] | undefined> = {};
    const chunks: Buffer[] = [];
    let size = 0;
    const limit = Math.max(req.limit ?? READ_LIMIT, req.keep);
    const finish = (result: OutboundResult) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(result);
    };
    const answered = (cut: boolean): OutboundResult => {
      const head = req.keep > 0 ? Buffer.concat(chunks) : undefined;
      const declared = Number(headers["content-length"]);
      const length = Number.isSafeInteger(declared) && declared >= size ? declared : size;
      return {
        answered: true,
        status,
        contentType: String(headers["content-type"] ?? ""),
        text: head && !req.capture ? head.toString("utf8") : "",
        bytes: req.keep > 0 ? length : 0,
        cut,
        ms: ms(),
        ...(req.capture && { head, headers }),
        ...(headers["retry-after"] !== undefined && { retryAfter: String(headers["retry-after"]) }),
      };
    };
    const expire = (phase: "wait" | "answer", after: number) =>
      setTimeout(() => {
        timedOut = phase;
        // Not sent yet: answered now, and the request is dropped once it reaches a connection.
        if (phase === "wait") finish({ answered: false, error: `no connection within ${req.waitMs} ms`, ms: ms() });
        else abortSoon(() => controller?.abort(new Error("timed out")));
      }, after);
    let timer = expire(req.waitMs === undefined ? "answer" : "wait", req.waitMs ?? req.timeoutMs);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (done) return c.abort(new Error("timed out waiting for a connection"));
        if (req.waitMs !== undefined) {
          clearTimeout(timer);
          timer = expire("answer", req.timeoutMs);
        }
      },
      onResponseStart(_c, statusCode, responseHeaders) {
        status = statusCode;
        headers = responseHeaders as Record<string, string | string[] | undefined>;
      },
      onResponseData(c, chunk) {
        if (status < 200) return;
        if (size < req.keep) chunks.push(chunk.subarray(0, req.keep - size));
        size += chunk.length;
        if (size > limit) {
          finish(answered(true));
          c.abort(new Error("answer longer than read"));
        }
      },
      onResponseEnd() {
        finish(answered(false));
      },
      onResponseError(_c, err) {
        if (timedOut === "wait") return finish({ answered: false, error: `no connection within ${req.waitMs} ms`, ms: ms() });
        finish({ answered: false, error: describeFailure(err, timedOut === "answer", req.timeoutMs), ms: ms() });
      },
    };
    try {
      agent.dispatch(
        {
          origin: target.origin,
          path: target.path,
          method: req.method,
          headers: req.headers,
          body: req.body,
          headersTimeout: req.timeoutMs,
          bodyTimeout: req.timeoutMs,
        },
        handler,
      );
    } catch (err) {
      finish({ answered: false, error: describeFailure(err, false, req.timeoutMs), ms: ms() });
    }
  });
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
