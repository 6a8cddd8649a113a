import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { Caller } from "../../shared/api/context";
import { ApiError, invalidParam } from "../../shared/errors";
import { EVENT_TYPE_MAX, EVENT_TYPE_PATTERN } from "../../shared/records/events";
import { newId } from "../../shared/ids";
import {
  ANNOUNCE_MS,
  LISTENER_EVENT,
  LISTENERS_ANNOUNCE,
  typeMatches,
  type Announcement,
  type ListenedTenant,
  type ListenerEvent,
} from "../../shared/records/listeners";
import { deliveryId, SECRET_PREFIX } from "../../shared/records/deliveries";
import { deliveryHeaders } from "../../shared/net/signing";
import type { IdentityCache } from "./identity-cache";

/**
 * `GET /v1/listen`: a Server-Sent Events stream of the caller's tenant's events, each as a signed
 * delivery (Standard Webhooks headers, keyed with a secret made for the session and sent first),
 * for the CLI's `listen --forward-to`. The CLI reports each local answer with
 * `POST /v1/listen/{id}/attempts` (the dispatcher stores it in the delivery log).
 */
const PING_MS = 15_000;
/** Streams of one tenant on one node. */
const MAX_STREAMS_PER_TENANT = 10;
/** A client that lets this much pile up unread is cut off rather than held in memory. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
const MAX_PATTERNS = 50;

interface Stream {
  id: string;
  /** The key that opened it, looked up again now and then: a revoked or expired key's stream ends. */
  token: string;
  key_id: string;
  secret: string;
  tenant: ListenedTenant;
  patterns: string[];
  res: ServerResponse;
}

export interface ListenVars {
  streams: Map<string, Stream>;
  identities: IdentityCache;
  listenTimer: NodeJS.Timeout | undefined;
  answered: number;
}
export interface ListenMethods {
  /** Answers the request with the stream (headers written here, so the caller's `send` does nothing). */
  openStream(req: IncomingMessage, res: ServerResponse, caller: Caller, requestId: string, query: Record<string, unknown>): Promise<void>;
  announceListeners(): void;
  /** Ends every stream (the node stops): open streams would hold the HTTP server's close. */
  closeStreams(): void;
  /** Ends the streams whose key was revoked or expired (after an invalidation, and every few seconds). */
  checkStreams(): void;
}

const tenantKey = (t: ListenedTenant) => `${t.org_id}\n${t.environment}`;

/** `--events a.b,c.*` as the query's `events=a.b,c.*`; none: every type. */
export function parsePatterns(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === "") return [];
  const patterns = [...new Set(raw.split(",").map((p) => p.trim()))].filter(Boolean);
  if (patterns.length > MAX_PATTERNS) throw invalidParam("events", `At most ${MAX_PATTERNS} event types`);
  for (const p of patterns) {
    // A prefix is a type's first parts: `order.*` stands for `order.x`, `order.line.*` for `order.line.x`.
    const ok = p === "*" || (p.length <= EVENT_TYPE_MAX && EVENT_TYPE_PATTERN.test(p.endsWith(".*") ? `${p.slice(0, -2)}.x` : p));
    if (!ok) throw invalidParam("events", `'${p}' is not an event type, a prefix such as 'order.*', or '*'`);
  }
  return patterns;
}

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

const ListenMixinSchema: Partial<ServiceSchema<ServiceSettingSchema, ListenMethods, ListenVars>> = {
  actions: {
    /** GET /listen — the stream's parameters (the gateway answers the request itself). */
    listen: {
      visibility: "protected",
      params: { $$strict: true, events: { type: "string", max: 5000, optional: true } },
      handler(ctx: Context<{ events?: string }>) {
        return parsePatterns(ctx.params.events);
      },
    },
  },

  events: {
    [LISTENER_EVENT]: {
      handler(ctx: Context<ListenerEvent>) {
        const { org_id, environment, ...event } = ctx.params;
        for (const stream of this.streams.values()) {
          if (stream.tenant.org_id !== org_id || stream.tenant.environment !== environment) continue;
          if (!typeMatches(stream.patterns, event.type)) continue;
          // The id the dispatcher derives again when the CLI reports the answer to it.
          const id = deliveryId(event.id, stream.id);
          const body = JSON.stringify({ id: event.id, type: event.type, created_at: event.created_at, data: event.data });
          const headers = deliveryHeaders({ id, event_type: event.type }, body, [stream.secret]);
          stream.res.write(sse("delivery", { id, event_id: event.id, event_type: event.type, headers, body }));
          if (stream.res.writableLength > MAX_BUFFERED_BYTES) stream.res.destroy();
        }
      },
    },
    // A node that joins learns the listened tenants now, not at the next renewal.
    "$node.connected"() {
      if (this.streams.size > 0) this.announceListeners();
    },
  },

  methods: {
    async openStream(req, res, caller, requestId, query) {
      const patterns = (await this.actions.listen(query)) as string[];
      const tenant = { org_id: caller.org_id, environment: caller.environment };
      const key = tenantKey(tenant);
      if ([...this.streams.values()].filter((s) => tenantKey(s.tenant) === key).length >= MAX_STREAMS_PER_TENANT) {
        throw new ApiError("quota_exceeded", `At most ${MAX_STREAMS_PER_TENANT} listeners per environment on one gateway; stop one first`);
      }
      const stream: Stream = {
        id: `ls_${newId("del").slice(4)}`,
        // authenticate() accepted this header's shape.
        token: /^Bearer\s+(\S+)/i.exec(req.headers.authorization ?? "")?.[1] ?? "",
        key_id: caller.key_id,
        secret: `${SECRET_PREFIX}${randomBytes(24).toString("base64")}`,
        tenant,
        patterns,
        res,
      };
      // Stored first: the CLI's reports name it, and only a session of their own tenant is taken.
      await this.broker.call("webhook-dispatcher.openListenerSession", { id: stream.id, ...tenant, key_id: caller.key_id });
      res.writeHead(200, {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-store",
        "X-Accel-Buffering": "no",
        // Never reused for another request: once the stream ends, so does its connection.
        Connection: "close",
        "Request-Id": requestId,
      });
      res.write(sse("session", { id: stream.id, secret: stream.secret, ...tenant, events: patterns }));
      this.streams.set(stream.id, stream);
      const isNewTenant = [...this.streams.values()].filter((s) => tenantKey(s.tenant) === key).length === 1;
      if (isNewTenant) this.announceListeners();
      res.once("close", () => {
        this.streams.delete(stream.id);
        this.answered += 1;
        if (![...this.streams.values()].some((s) => tenantKey(s.tenant) === key)) this.announceListeners();
      });
      req.socket.setKeepAlive(true, PING_MS);
    },

    closeStreams() {
      if (this.streams.size === 0) return;
      // The CLI reconnects, to another gateway behind the same address if there is one.
      for (const s of this.streams.values()) s.res.end(sse("closing", { reason: "the gateway is stopping" }));
      this.streams.clear();
      this.announceListeners();
    },

    checkStreams() {
      for (const s of this.streams.values()) {
        this.identities.get(s.token).then(
          (identity) => {
            const expired = identity.expires_at !== null && Date.parse(identity.expires_at) <= Date.now();
            if (identity.status === "revoked" || this.identities.wasRevoked(s.key_id) || expired) {
              s.res.end(sse("closing", { reason: expired ? "the API key expired" : "the API key was revoked" }));
            }
          },
          // The key's lookup failing (auth out of reach) ends nothing: the next check retries it.
          () => undefined,
        );
      }
    },

    announceListeners() {
      const tenants = new Map<string, ListenedTenant>();
      for (const s of this.streams.values()) tenants.set(tenantKey(s.tenant), s.tenant);
      const announcement: Announcement = { node_id: this.broker.nodeID, tenants: [...tenants.values()] };
      this.broker.broadcast(LISTENERS_ANNOUNCE, announcement).catch(() => undefined);
    },
  },

  created() {
    this.streams = new Map();
  },

  started() {
    let beat = 0;
    this.listenTimer = setInterval(() => {
      if (this.streams.size === 0) return;
      this.announceListeners();
      this.checkStreams();
      // A comment line now and then: proxies keep the stream open, and a dead client is found.
      if (++beat % Math.round(PING_MS / ANNOUNCE_MS) === 0) for (const s of this.streams.values()) s.res.write(": ping\n\n");
    }, ANNOUNCE_MS);
    this.listenTimer.unref();
  },

  stopped() {
    clearInterval(this.listenTimer);
    this.closeStreams();
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const ListenMixin = ListenMixinSchema as Partial<ServiceSchema>;
