import { serviceSignature, standardSignature } from "../../shared/net/signing";
import type { Api } from "./http";
import type { Output } from "./output";
import { safe } from "./printable.logic";

/**
 * `listen --forward-to URL`: the platform's stream of the key's tenant's events (GET /v1/listen),
 * each delivery POSTed to the local URL with the headers the platform signed it with, and the
 * local answer reported back (POST /v1/listen/{session}/attempts) for the delivery log.
 *
 * A reconnection opens a new session with a new secret, but the local app was set up with the one
 * printed first: the CLI signs what the new session sent again with that first secret (after
 * checking the new session's signature), so the local app goes on verifying with one secret for
 * as long as the CLI runs.
 */
export interface ListenOptions {
  forwardTo: string;
  events: string | undefined;
  timeoutMs: number;
}

interface Delivery {
  id: string;
  event_id: string;
  event_type: string;
  headers: Record<string, string>;
  body: string;
}
interface Session {
  id: string;
  secret: string;
  org_id: string;
  environment: string;
  events: string[];
}

const EXCERPT_BYTES = 1024;
/**
 * The gateway writes a comment line every 15 s on an idle stream: this long without a byte, the
 * gateway's machine is gone (a dead process resets the connection at once), so reconnect.
 */
const SILENCE_MS = 50_000;
/** Reconnections after the stream ends (a gateway stopped), each after a longer wait, before giving up. */
const RECONNECTS = 10;

/** The start of a body, at most `max` bytes read (a large answer is not read whole). */
async function excerpt(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < max) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.length;
  }
  await reader.cancel().catch(() => undefined);
  return Buffer.concat(chunks)
    .subarray(0, max)
    .toString("utf8")
    .replace(/\uFFFD+$/, "");
}

/** Server-Sent Events from a byte stream: (event, data) pairs. */
async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length > 0) yield { event, data: data.join("\n") };
    }
  }
}

/**
 * The delivery's headers signed with `secret` instead of the session's own, when they differ: the
 * same webhook-id and timestamp, so the local app sees the delivery as the platform made it.
 */
export function signedWith(secret: string, session: Session, d: Delivery): Record<string, string> {
  if (secret === session.secret) return d.headers;
  const id = d.headers["webhook-id"] ?? "";
  const timestamp = Number(d.headers["webhook-timestamp"]);
  const expected = standardSignature([session.secret], id, timestamp, d.body);
  if (d.headers["webhook-signature"] !== expected) throw new Error(`delivery ${d.id} is not signed by its session: not forwarded`);
  return {
    ...d.headers,
    "service-signature": serviceSignature(secret, d.body),
    "webhook-signature": standardSignature([secret], id, timestamp, d.body),
  };
}

async function forward(api: Api, out: Output, session: Session, d: Delivery, opts: ListenOptions, secret: string): Promise<void> {
  out.line({ kind: "event", delivery_id: d.id, event_id: d.event_id, event_type: d.event_type }, safe`--> ${d.event_type} [${d.event_id}]`);
  const started = performance.now();
  let status_code: number | null = null;
  let error: string | null = null;
  let response_excerpt = "";
  try {
    const res = await fetch(opts.forwardTo, {
      method: "POST",
      headers: signedWith(secret, session, d),
      body: d.body,
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    status_code = res.status;
    response_excerpt = await excerpt(res, EXCERPT_BYTES);
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    error = (err as Error).name === "TimeoutError" ? `no answer within ${opts.timeoutMs} ms` : (cause?.code ?? (err as Error).message);
  }
  const duration_ms = Math.round(performance.now() - started);
  out.line(
    { kind: "attempt", delivery_id: d.id, event_id: d.event_id, status_code, duration_ms, error },
    safe`<-- [${status_code ?? "ERR"}] POST ${opts.forwardTo} (${duration_ms} ms)${error ? ` ${error}` : ""} [${d.id}]`,
  );
  try {
    await api.call("POST", `/listen/${session.id}/attempts`, {
      delivery_id: d.id,
      event_id: d.event_id,
      status_code,
      duration_ms,
      error,
      response_excerpt: response_excerpt.slice(0, EXCERPT_BYTES),
    });
  } catch (err) {
    out.warn(`could not report the answer to ${d.id}: ${(err as Error).message}`);
  }
}

/** The secret the local app verifies with: the first session's, printed once. */
interface Signing {
  secret: string | undefined;
}

/** One session: until its stream ends; answers whether it ever started. */
async function session(api: Api, out: Output, opts: ListenOptions, signal: AbortSignal, signing: Signing): Promise<boolean> {
  const query = opts.events ? `?events=${encodeURIComponent(opts.events)}` : "";
  const silent = new AbortController();
  const res = await api.open(`/listen${query}`, AbortSignal.any([signal, silent.signal]));
  let current: Session | undefined;
  let queue = Promise.resolve();
  let watchdog = setTimeout(() => silent.abort(), SILENCE_MS);
  const heard = (chunk: Uint8Array) => {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => silent.abort(), SILENCE_MS);
    return chunk;
  };
  const body = (async function* () {
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) yield heard(chunk);
    } catch (err) {
      if (!silent.signal.aborted) throw err;
      out.warn(`nothing from the gateway for ${SILENCE_MS / 1000} s`);
    } finally {
      clearTimeout(watchdog);
    }
  })();
  for await (const { event, data } of sseEvents(body)) {
    if (event === "session") {
      current = JSON.parse(data) as Session;
      const types = current.events.length > 0 ? current.events.join(", ") : "every event type";
      if (signing.secret === undefined) {
        signing.secret = current.secret;
        out.line(
          { kind: "session", ...current, forward_to: opts.forwardTo },
          safe`Ready! Forwarding ${types} of ${current.org_id} (${current.environment}) to ${opts.forwardTo}\n` +
            safe`Your signing secret for this session is ${current.secret} (session ${current.id}; Ctrl-C to stop)`,
        );
      } else {
        // The secret printed first stays the one deliveries are signed with: not printed again.
        out.line(
          { kind: "session", ...current, secret: signing.secret, forward_to: opts.forwardTo },
          safe`Reconnected (session ${current.id}): still signed with the secret printed above`,
        );
      }
    } else if (event === "delivery" && current) {
      const s = current;
      const d = JSON.parse(data) as Delivery;
      // In order of arrival, one at a time: the local server sees them as the platform sent them.
      const secret = signing.secret!;
      queue = queue.then(() => forward(api, out, s, d, opts, secret).catch((err: Error) => out.warn(err.message)));
    } else if (event === "closing") {
      out.warn(`the gateway closed the stream: ${(JSON.parse(data) as { reason?: string }).reason ?? "no reason given"}`);
    }
  }
  await queue;
  return current !== undefined;
}

export async function listen(api: Api, out: Output, opts: ListenOptions): Promise<void> {
  const stop = new AbortController();
  process.once("SIGINT", () => stop.abort());
  process.once("SIGTERM", () => stop.abort());
  let failures = 0;
  const signing: Signing = { secret: undefined };
  while (!stop.signal.aborted) {
    try {
      if (await session(api, out, opts, stop.signal, signing)) failures = 0;
    } catch (err) {
      if (stop.signal.aborted) break;
      // Refusals (a bad key, a bad --events) do not get better by retrying.
      const status = (err as { status?: number }).status ?? 0;
      if (status >= 400 && status < 500) throw err;
      out.warn((err as Error).message);
    }
    if (stop.signal.aborted) break;
    if (++failures > RECONNECTS) throw new Error(`the stream ended ${RECONNECTS + 1} times in a row; giving up`);
    const wait = Math.min(5_000, 250 * 2 ** failures);
    out.info(`reconnecting in ${wait} ms`);
    await new Promise((r) => setTimeout(r, wait));
  }
}
