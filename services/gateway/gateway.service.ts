import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { parse as parseQuery } from "node:querystring";
import type { Context, ServiceBroker, ServiceSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import type { CallMeta, Caller } from "../../shared/api/context";
import { ApiError, ERROR_CODES, isErrorCode } from "../../shared/errors";
import { FailureLog } from "../../shared/runtime/failure-log";
import { newId, timeOfId } from "../../shared/ids";
import type { AuditRecord } from "../../shared/records/audit";
import { Metrics } from "../../shared/runtime/metrics";
import { REQUEST_ID_PATTERN, validTraceparent } from "../../shared/runtime/trace";
import { IDENTITY_TTL_MS, type Identity, type Invalidation } from "../../shared/api/identity";
import { SERVICE_NAMES } from "../../shared/config";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { checkPageNumbers } from "../../shared/api/pagination";
import { grants } from "../../shared/api/scopes";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { collectionSpec } from "../../shared/storage/types";
import { Meter } from "./meter";
import { LATEST_VERSION, resolveVersion } from "../../shared/api/versions";
import { hasBody, readJsonBody } from "./body";
import { BusGuard, busLinkOf } from "./bus-guard";
import { dashboardServer, defaultDashboardDir, isDashboardPath } from "./dashboard";
import { toHttpError } from "./http-errors";
import { Idempotency, fingerprintOf, type IdempotencyDoc } from "./idempotency";
import { IdentityCache } from "./identity-cache";
import { ListenMixin, type ListenMethods, type ListenVars } from "./listen.mixin";
import { RateLimiter, type RateDecision } from "./rate-limiter";
import { locationOf, matchRoute, type AuditSpec, type RouteDef } from "./routes";
import { AuditWriter, auditedResource } from "./audit";
import { chainOf, SERVICE_CHAIN_HEADER, type Chain } from "../../shared/records/chain";

const TOUCH_INTERVAL_MS = 5_000;
/** Usage leaves for the analytics service every second; ten minutes of batches wait for it at most. */
const METER_FLUSH_MS = 1_000;
const METER_MAX_BATCHES = 600;
const READY_STORE_TIMEOUT_MS = 1_000;
const SWEEP_INTERVAL_MS = 60_000;
/** Far longer than any key (API_KEY_PATTERN, shared/api/identity.ts): refused without asking the auth service. */
const MAX_TOKEN_LENGTH = 200;

/** What the gateway learns about one request along the way. */
interface Exchange {
  requestId: string;
  /** The client's traceparent, when valid: passed on to what the request starts. */
  traceparent?: string;
  /** A workflow run's chain (its http step's `Service-Chain`), when well-formed: passed on to the event it posts. */
  chain?: Chain;
  version: string;
  /** performance.now() when the request came in. */
  start: number;
  method: string;
  /** The client's address (the socket's, or X-Forwarded-For's last with TRUST_PROXY): its budgets' key. */
  address: string;
  /** The request sent a body that was not read (whole): the answer closes the connection. */
  unreadBody: boolean;
  /** The matched route's template, for metering. */
  route?: string;
  /** The request's path under /v1, for a creation's Location. */
  path?: string;
  caller?: Caller;
  rate?: RateDecision;
  idempotency?: { id: string; tenant: { org_id: string; environment: Caller["environment"] } };
}

const STORE = declareStore({
  owns: { idempotencyKeys: collectionSpec<IdempotencyDoc>("idempotency_keys", [{ fields: { expires_at: 1 } }]) },
});

interface GatewayVars extends StoreVars<typeof STORE>, ListenVars {
  broker: ServiceBroker;
  identities: IdentityCache;
  /** Drops the cache on every reconnect to NATS; 503 while NATS is out of reach (see bus-guard.ts). */
  bus: BusGuard;
  limiter: RateLimiter;
  /** Every key of an organization together. */
  orgLimiter: RateLimiter;
  /** Every request from one client address, with a key or without (/health and /ready too). */
  addressLimiter: RateLimiter;
  /** Requests from one client address answered 401 (no key, a malformed or unknown one): a key's budget. */
  failedAuthLimiter: RateLimiter;
  trustProxy: boolean;
  bodyTimeoutMs: number;
  /** The node is stopping: every answer closes its connection, and requests read from now on are refused. */
  stopping: boolean;
  idempotency: Idempotency;
  gatewayNodes: number;
  /** key id → organization and time of last use, flushed to keys.touch every few seconds. */
  usage: Map<string, { org_id: string; at: number }>;
  meter: Meter;
  metering: boolean;
  /** HTTP requests read and answered (fully written) by this node: equal once it has stopped. */
  received: number;
  answered: number;
  /** LOG_LEVEL is debug or trace: write the access log. */
  accessLog: boolean;
  timers: NodeJS.Timeout[];
  dashboard: ReturnType<typeof dashboardServer>;
  /** Failed store probes of /ready, logged once per kind of failure. */
  storeProbe: FailureLog;
  /** HTTP requests by route template, method and status, and their latency (shared/runtime/metrics.ts). */
  metrics: Metrics;
  /** The audit log's entries on their way to the orgs service, by group commit (audit.ts). */
  auditLog: AuditWriter;
}
interface GatewayMethods extends ListenMethods {
  httpHandler(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** GET /dashboard/…: the built browser dashboard, which calls only the /v1 API. */
  serveDashboard(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  /** `path` is the URL without its query, `search` the query (without "?"), or null. */
  handle(
    req: IncomingMessage,
    x: Exchange,
    path: string,
    search: string | null,
    res: ServerResponse,
  ): Promise<{ status: number; body: unknown }>;
  authenticate(req: IncomingMessage, x: Exchange): Promise<Caller>;
  /** Who asked, for the per-address budgets: the socket's peer, or the proxy's word for it with TRUST_PROXY. */
  clientAddress(req: IncomingMessage): string;
  /** A new request's bookkeeping: its id, start time, method, client address. */
  exchangeOf(req: IncomingMessage): Exchange;
  /** Node's own time-outs (headers, whole request) and the contract's 408 when they strike. */
  configureServer(server: Server, headersTimeoutMs: number, bodyTimeoutMs: number): void;
  send(res: ServerResponse, x: Exchange, status: number, body: unknown, extra?: OutgoingHttpHeaders): void;
  renderError(res: ServerResponse, x: Exchange, method: string, err: unknown): void;
  countGateways(): void;
  flushUsage(): Promise<void>;
  /**
   * `GET /ready`: 200 while the broker is connected, the store takes a write (a probe, within 1 s)
   * and the auth service answers (naming any other service with no node); else 503.
   */
  readiness(): Promise<{ status: number; body: unknown }>;
  /** The store probe's verdict: "ok", or "unavailable: <why>" (the disk is full, no answer within 1 s, …). */
  probeStore(): Promise<string>;
  /** Sends the meter's batches to the analytics service, oldest first, until one is refused. */
  flushMeter(): Promise<void>;
  /**
   * Stores the audit log entry of a mutation that succeeded, before its answer leaves; a failed
   * store is logged (error, with the request id and the whole entry) and answered 500.
   */
  recordAudit(
    x: Exchange,
    caller: Caller,
    spec: AuditSpec,
    params: Record<string, string>,
    data: Record<string, unknown>,
    status: number,
  ): Promise<void>;
}

type GatewaySettings = PlatformSettings & { port: number; ip: string; [option: string]: unknown };

/** A sentinel carrying a stored answer out of the idempotency check. */
class Replay {
  constructor(
    readonly status: number,
    readonly body: unknown,
    /** The field of `data` whose secret was not kept (answered as null). */
    readonly redacted: string | null,
  ) {}
}

/**
 * The only door. moleculer-web hosts the HTTP server; the /v1 request path is this service's own
 * (`httpHandler`): route by the table in routes.ts, read the JSON body, authenticate the bearer key,
 * check the route's scope, rate-limit, resolve the API version, replay idempotent POSTs, call the
 * action and render every answer and error in the contract's shape. Services return plain data.
 * (moleculer-web's own per-request pipeline cost more than the whole latency budget: see README.)
 */
const GatewayService: ServiceSchema<GatewaySettings, GatewayMethods, GatewayVars> = {
  name: "gateway",
  mixins: [ApiGateway as unknown as Partial<ServiceSchema>, StoreMixin(STORE), ListenMixin],

  settings: {
    port: 3000,
    ip: "0.0.0.0",
    routes: [],
    logRequest: null,
    logResponse: null,
    log4XXResponses: false,
    logRouteRegistration: false,
  } as unknown as GatewaySettings, // the platform's part (PlatformSettings) is added by app/broker.ts

  actions: {
    // moleculer-web's own actions are not part of this API.
    rest: false,
    listAliases: false,
    addRoute: false,
    removeRoute: false,

    /** Internal: drop a key or an organization from this node's identity cache (see auth.invalidate). */
    invalidate: {
      visibility: "public",
      params: { key_id: { type: "string", optional: true }, org_id: { type: "string", optional: true } },
      handler(ctx: Context<Invalidation>) {
        this.identities.invalidate(ctx.params);
        this.checkStreams();
        this.logger.debug("Identity invalidated", ctx.params);
        return true;
      },
    },
  },

  events: {
    "$services.changed"() {
      this.countGateways();
    },
    // After a reconnect this node may have missed invalidations: start from the store again.
    "$transporter.connected"() {
      this.identities.clear();
    },
  },

  methods: {
    async httpHandler(req, res) {
      const url = req.url ?? "/";
      const q = url.indexOf("?");
      const path = q < 0 ? url : url.slice(0, q);
      if (isDashboardPath(path)) return this.serveDashboard(req, res, path);
      this.received += 1;
      const x = this.exchangeOf(req);
      try {
        if (this.stopping) throw new ApiError("service_unavailable", "This gateway is stopping; retry on another", { retry_after: 1 });
        // A replay comes back as a thrown Replay (see renderError), never as an answer here.
        const { status, body } = await this.handle(req, x, path, q < 0 ? null : url.slice(q + 1), res);
        this.send(res, x, status, body);
      } catch (err) {
        this.renderError(res, x, req.method ?? "GET", err);
      }
    },

    async serveDashboard(req, res, path) {
      const x = this.exchangeOf(req);
      try {
        if (req.method !== "GET" && req.method !== "HEAD") {
          throw new ApiError("method_not_allowed", `${req.method} is not allowed here; use GET, HEAD`, { allow: "GET, HEAD" });
        }
        if (!this.dashboard.built) throw new ApiError("route_not_found", "The dashboard is not built on this node: run `npm run build`");
        if (!(await this.dashboard.serve(req, res, path))) throw new ApiError("route_not_found", `No route ${req.method} ${path}`);
      } catch (err) {
        this.renderError(res, x, req.method ?? "GET", err);
      }
    },

    async handle(req, x, path, search, res) {
      // Every request spends its address's budget first, before it costs anything else.
      const byAddress = this.addressLimiter.hit(x.address);
      if (!byAddress.allowed) {
        x.rate = byAddress;
        throw new ApiError("rate_limited", "Too many requests from this address; slow down", { retry_after: byAddress.reset });
      }
      if ((path === "/health" || path === "/ready") && (req.method === "GET" || req.method === "HEAD")) {
        x.route = path;
        return path === "/health" ? { status: 200, body: { status: "ok" } } : this.readiness();
      }
      if (path === "/v1/openapi.json" && req.method === "GET") return { status: 200, body: this.settings.apiReference() };
      if (!path.startsWith("/v1/")) throw new ApiError("route_not_found", `No route ${req.method} ${path}`);
      const match = matchRoute(req.method ?? "", path.slice(3));
      if (!match.route) {
        if (match.allowed.length === 0) throw new ApiError("route_not_found", `No route ${req.method} ${path}`);
        throw new ApiError("method_not_allowed", `${req.method} is not allowed here; use ${match.allowed.join(", ")}`, {
          allow: match.allowed.join(", "),
        });
      }
      const route: RouteDef = match.route;
      x.route = route.path;
      x.path = path.slice(3);

      // Who asks and whether they may, before the body is read: an unauthenticated sender costs no
      // parsing, and its unread body closes the connection (renderError).
      const caller = await this.authenticate(req, x);
      if (route.scope !== null && !grants(caller.scopes, route.scope)) {
        throw new ApiError("insufficient_scope", `This request needs the '${route.scope}' scope, which your key does not hold`, {
          scope: route.scope,
        });
      }
      const query = search === null ? {} : (parseQuery(search) as Record<string, unknown>);
      checkPageNumbers(query);
      // A stream (GET /listen) writes its own answer: `send` then finds the headers sent.
      if (route.stream) {
        await this.openStream(req, res, caller, x.requestId, query);
        return { status: 200, body: null };
      }
      const body = await readJsonBody(req, this.bodyTimeoutMs - (performance.now() - x.start));
      x.unreadBody = false;
      // Path parameters win over body and query ones of the same name: refuse the clash, never hide it.
      for (const name of Object.keys(match.params)) {
        if ((body && name in body) || name in query) {
          throw new ApiError("parameter_unknown", `Received unknown parameter: ${name} (it is part of the path)`, { param: name });
        }
      }
      // A replay is bound to the calling key (its fingerprint holds it), after authentication and the
      // scope: another key reusing an Idempotency-Key is refused (409), never given the first answer.
      const idemKey = req.headers["idempotency-key"];
      if (req.method === "POST" && typeof idemKey === "string") {
        const tenant = { org_id: caller.org_id, environment: caller.environment };
        const begun = await this.idempotency.begin(tenant, idemKey, fingerprintOf(caller.key_id, req.method, path, search, body));
        if (begun.kind === "replay") throw new Replay(begun.status, begun.body, begun.redacted);
        x.idempotency = { id: begun.id, tenant };
      }

      const meta: CallMeta = {
        auth: caller,
        api_version: x.version,
        request_id: x.requestId,
        ...(x.traceparent && { traceparent: x.traceparent }),
        ...(x.chain && { chain: x.chain }),
      };
      // Reads are safe to repeat: one that meets a dead node is retried on another (cluster only).
      const data = await this.broker.call<any, Record<string, unknown>>(
        route.action,
        { ...body, ...query, ...match.params },
        { meta, ...(route.method === "GET" && { retries: 2 }) },
      );
      // A request whose key was revoked while it ran is refused, whatever it did (its change, done, is audited).
      const revoked = this.identities.wasRevoked(caller.key_id);
      const status = route.status ?? 200;
      // A list's meta is all its action answers besides the items (see ListResult).
      const { items, ...listMeta } = route.list ? data : { items: undefined };
      const envelope = route.list ? { object: "list", data: items, meta: listMeta } : { data };
      if (x.idempotency && !revoked) {
        await this.idempotency.complete(x.idempotency.tenant, x.idempotency.id, status, envelope, route.secret);
        // Settled: a later failure (the audit entry's) must not overwrite the change's stored answer.
        x.idempotency = undefined;
      }
      if (route.audit) await this.recordAudit(x, caller, route.audit, match.params, data, revoked ? 401 : status);
      if (revoked) throw new ApiError("api_key_revoked", "This API key has been revoked");
      return { status, body: envelope };
    },

    async authenticate(req, x) {
      // An address whose requests were refused 401 a key's budget of times this window waits for the
      // next one: unknown keys cost a lookup each.
      const failures = this.failedAuthLimiter.check(x.address);
      if (!failures.allowed) {
        x.rate = failures;
        throw new ApiError("rate_limited", "Too many requests without a valid API key from this address; slow down", {
          retry_after: failures.reset,
        });
      }
      let identity: Identity;
      try {
        const header = req.headers.authorization;
        if (!header) throw new ApiError("missing_api_key", "Send your API key as 'Authorization: Bearer <key>'");
        const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
        if (!match) throw new ApiError("invalid_api_key", "The Authorization header must be 'Bearer <key>'");
        if (match[1].length > MAX_TOKEN_LENGTH) throw new ApiError("invalid_api_key", "The API key is malformed");
        this.bus.check();
        identity = await this.identities.get(match[1]);
        if (identity.status === "revoked" || this.identities.wasRevoked(identity.key_id)) {
          throw new ApiError("api_key_revoked", "This API key has been revoked");
        }
        if (identity.expires_at !== null && Date.parse(identity.expires_at) <= Date.now()) {
          throw new ApiError("api_key_expired", `This API key expired at ${identity.expires_at}`);
        }
      } catch (err) {
        if (toHttpError(err).status === 401) this.failedAuthLimiter.hit(x.address);
        throw err;
      }
      const now = Date.now();
      x.version = resolveVersion(req.headers["service-version"] as string | undefined, identity.api_version);
      const caller: Caller = {
        key_id: identity.key_id,
        key_name: identity.key_name,
        org_id: identity.org_id,
        environment: identity.environment,
        scopes: identity.scopes,
      };
      x.caller = caller;
      x.rate = this.limiter.hit(identity.key_id, now);
      if (!x.rate.allowed) {
        throw new ApiError("rate_limited", "Too many requests with this API key; slow down", { retry_after: x.rate.reset });
      }
      const byOrg = this.orgLimiter.hit(identity.org_id, now);
      if (!byOrg.allowed) {
        x.rate = byOrg;
        throw new ApiError("rate_limited", "Too many requests for this organization (all its keys together); slow down", {
          retry_after: byOrg.reset,
        });
      }
      this.usage.set(identity.key_id, { org_id: identity.org_id, at: now });
      return caller;
    },

    exchangeOf(req) {
      // A client's own request id is kept when well-formed (REQUEST_ID_PATTERN); anything else gets ours.
      const given = req.headers["x-request-id"];
      const traceparent = validTraceparent(req.headers.traceparent);
      const chain = chainOf(req.headers[SERVICE_CHAIN_HEADER]);
      return {
        requestId: typeof given === "string" && REQUEST_ID_PATTERN.test(given) ? given : newId("req"),
        ...(traceparent && { traceparent }),
        ...(chain && { chain }),
        version: LATEST_VERSION,
        start: performance.now(),
        method: req.method ?? "GET",
        address: this.clientAddress(req),
        unreadBody: hasBody(req),
      };
    },

    clientAddress(req) {
      if (this.trustProxy) {
        const forwarded = req.headers["x-forwarded-for"];
        const last = (Array.isArray(forwarded) ? forwarded.join(",") : (forwarded ?? "")).split(",").pop()?.trim();
        if (last) return last;
      }
      return req.socket.remoteAddress ?? "unknown";
    },

    configureServer(server, headersTimeoutMs, bodyTimeoutMs) {
      server.headersTimeout = headersTimeoutMs;
      // Node's own limit on a whole request is a backstop: readJsonBody answers a slow body first.
      server.requestTimeout = headersTimeoutMs + bodyTimeoutMs + 1_000;
      // How often Node looks for expired requests (its default, 30 s, would add up to that much).
      server.connectionsCheckingInterval = Math.min(1_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));
      server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
        const busy = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
        if (!socket.writable || busy) return void socket.destroy();
        let head = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
        if (err.code === "HPE_HEADER_OVERFLOW") head = "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n";
        if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
          const requestId = newId("req");
          const message = `The request's headers did not arrive within ${headersTimeoutMs} ms`;
          const payload = JSON.stringify({
            error: { type: ERROR_CODES.request_timeout.type, code: "request_timeout", message, request_id: requestId },
          });
          head = `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nRequest-Id: ${requestId}\r\nConnection: close\r\n\r\n${payload}`;
        }
        socket.write(head, () => socket.destroy());
      });
    },

    send(res, x, status, body, extra) {
      if (res.headersSent || res.writableEnded) return;
      const ms = performance.now() - x.start;
      if (x.caller && x.route) {
        const { org_id, environment, key_id } = x.caller;
        this.meter.record({ at: Date.now(), org_id, environment, key_id, method: x.method, route: x.route, status, latency_ms: ms });
      }
      if (this.metrics.enabled) {
        // The route's template (never the raw path, whose ids would make a series each), and the status the client gets.
        const route = x.route ?? "unmatched";
        this.metrics.increment("httpRequests", { route, method: x.method, status });
        this.metrics.observe("httpDuration", ms / 1000, { route, method: x.method });
      }
      // The access log, at debug level (LOG_LEVEL=debug): one JSON line per answer, by request id.
      // Checked first: the line is not even built on the request path otherwise.
      if (this.accessLog)
        this.logger.debug(
          {
            request_id: x.requestId,
            method: x.method,
            route: x.route ?? null,
            status,
            duration_ms: Math.round(ms * 100) / 100,
            key_id: x.caller?.key_id ?? null,
          },
          "request",
        );
      const payload = JSON.stringify(body);
      const headers: OutgoingHttpHeaders = {
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": Buffer.byteLength(payload),
        "Request-Id": x.requestId,
        "Service-Version": x.version,
        ...extra,
      };
      // A stopping node lets no connection linger (kept-alive clients move to another node).
      if (this.stopping) headers.Connection = "close";
      const location = status === 201 && x.path !== undefined ? locationOf(x.path, body) : undefined;
      if (location !== undefined) headers.Location = location;
      if (x.rate) {
        headers["RateLimit-Limit"] = x.rate.limit;
        headers["RateLimit-Remaining"] = Math.max(0, x.rate.remaining);
        headers["RateLimit-Reset"] = x.rate.reset;
      }
      // Answers are written at the end of this turn of the event loop, together with the others
      // that completed in it: under load the client then reads several per wake-up and sends the
      // next ones together, which took the gateway's CPU per request from ~68 to ~44 us here.
      setImmediate(() => {
        if (res.destroyed || res.writableEnded) return;
        res.writeHead(status, headers);
        res.end(payload, () => (this.answered += 1));
      });
    },

    renderError(res, x, method, err) {
      if (err instanceof Replay) {
        return this.send(res, x, err.status, err.body, {
          "Idempotent-Replayed": "true",
          ...(err.redacted !== null && { "Secret-Redacted": err.redacted }),
        });
      }
      let http = toHttpError(err);
      // Whatever became of it, a request whose key was revoked while it ran answers as revoked.
      if (x.caller && http.status !== 401 && this.identities.wasRevoked(x.caller.key_id)) {
        http = { status: 401, code: "api_key_revoked", message: "This API key has been revoked" };
      }
      if (http.code === "internal_error") {
        this.logger.error({ request_id: x.requestId, method, err }, "Request failed");
      }
      const error = {
        type: ERROR_CODES[http.code].type,
        code: http.code,
        message: http.message,
        ...(http.param !== undefined && { param: http.param }),
        request_id: x.requestId,
      };
      if (x.idempotency) {
        const { tenant, id } = x.idempotency;
        // A 5xx or 429 may be retried with the same key; a 4xx is the request's own answer and is kept.
        const settle =
          http.status >= 500 || http.status === 429
            ? this.idempotency.abandon(tenant, id)
            : this.idempotency.complete(tenant, id, http.status, { error });
        settle.catch(() => undefined);
      }
      const extra: OutgoingHttpHeaders = {};
      if (http.retryAfter !== undefined) extra["Retry-After"] = http.retryAfter;
      const allow = (err as { data?: { allow?: string } })?.data?.allow;
      if (http.code === "method_not_allowed" && allow) extra.Allow = allow;
      // A body we did not read (refused before it: 401, 403, 404, 429, …) or stopped reading (413,
      // 408) leaves the connection in an unknown state, and a slow sender on it: close it.
      if (x.unreadBody || http.code === "payload_too_large") extra.Connection = "close";
      this.send(res, x, http.status, { error }, extra);
    },

    countGateways() {
      const nodes = new Set(
        this.broker.registry
          .getServiceList({ onlyAvailable: true, skipInternal: true })
          .filter((svc) => svc.name === "gateway")
          .map((svc) => svc.nodeID),
      );
      this.gatewayNodes = Math.max(1, nodes.size);
    },

    async readiness() {
      const available = new Set(
        this.broker.registry.getServiceList({ onlyAvailable: true, skipInternal: true }).map((svc: { name: string }) => svc.name),
      );
      const services = Object.fromEntries(SERVICE_NAMES.map((name) => [name, available.has(name)]));
      const started = Date.now();
      const store = await this.probeStore();
      const broker = (this.broker.transit ? this.broker.transit.connected : true) && this.bus.reachable();
      // What every request needs decides readiness (a load balancer then stops sending here); a
      // missing service only fails its own routes (503), so it is reported, not fatal.
      const ready = broker && store === "ok" && services.auth;
      const missing = SERVICE_NAMES.filter((name) => !services[name]);
      return {
        status: ready ? 200 : 503,
        body: {
          status: ready ? (missing.length > 0 ? "degraded" : "ready") : "not_ready",
          broker,
          store,
          store_ms: Date.now() - started,
          services,
          missing,
        },
      };
    },

    async probeStore() {
      // A real write through the store every service uses: a store that still reads but cannot
      // write (a full disk) must not be reported ready.
      let timer: NodeJS.Timeout | undefined;
      const verdict = await Promise.race([
        this.store.probe().then(
          () => "ok",
          (err: unknown) => {
            this.storeProbe.failed("store probe", err, "GET /ready answers 503");
            const e = err as { type?: unknown; data?: { reason?: unknown } } | null;
            const reason =
              typeof e?.data?.reason === "string"
                ? e.data.reason
                : isErrorCode(e?.type)
                  ? e.type
                  : "an unexpected error (see the gateway's log)";
            return `unavailable: ${reason}`;
          },
        ),
        new Promise<string>((ok) => {
          timer = setTimeout(() => ok(`unavailable: no answer within ${READY_STORE_TIMEOUT_MS} ms`), READY_STORE_TIMEOUT_MS);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
      if (verdict === "ok") this.storeProbe.ok("store probe");
      return verdict;
    },

    async flushMeter() {
      if (this.metering) return;
      this.metering = true;
      try {
        for (const batch of this.meter.batches()) {
          await this.broker.call("analytics.ingest", batch);
          this.meter.acknowledged(batch.batch_id);
        }
      } catch (err) {
        // Kept, with its id, for the next flush; the analytics service stores a batch once.
        if (this.meter.backlog > 10)
          this.logger.warn(`usage: ${this.meter.backlog} batches wait for the analytics service`, (err as Error).message);
      } finally {
        this.metering = false;
      }
    },

    async recordAudit(x, caller, spec, params, data, status) {
      const id = newId("aud");
      const entry: AuditRecord = {
        id,
        org_id: caller.org_id,
        environment: caller.environment,
        actor: { key_id: caller.key_id, key_name: caller.key_name ?? null },
        action: spec.action,
        method: x.method,
        route: x.route ?? "",
        resource: auditedResource(spec, params, data),
        request_id: x.requestId,
        client_address: x.address,
        status,
        // The id's own time: a time range of the list (a range of ids) then agrees with created_at to the millisecond.
        created_at: new Date(timeOfId(id)).toISOString(),
      };
      try {
        await this.auditLog.record(entry);
      } catch (err) {
        // Never silent: the entry is in this line (an operator can store it again), and the client
        // is not told the change succeeded without its record (its Idempotency-Key replays the success).
        this.logger.error({ request_id: x.requestId, audit_entry: entry, err }, "Audit log entry not stored; the change was applied");
        throw new ApiError("internal_error", "The change was applied, but its audit log entry could not be stored; it has been logged");
      }
    },

    async flushUsage() {
      if (this.usage.size === 0) return;
      const uses = [...this.usage].map(([key_id, { org_id, at }]) => ({ key_id, org_id, at: new Date(at).toISOString() }));
      this.usage.clear();
      await this.broker.call("keys.touch", { uses }).catch(() => undefined);
    },
  },

  created() {
    const settings = this.settings.config;
    this.settings.port = settings.port;
    this.settings.ip = settings.host;
    this.gatewayNodes = 1;
    this.usage = new Map();
    this.meter = new Meter(METER_MAX_BATCHES);
    this.received = 0;
    this.answered = 0;
    this.accessLog = settings.logLevel === "debug" || settings.logLevel === "trace";
    this.metering = false;
    this.dashboard = dashboardServer(defaultDashboardDir());
    this.storeProbe = new FailureLog(this.logger);
    this.metrics = new Metrics(this.broker, ["httpRequests", "httpDuration"]);
    this.identities = new IdentityCache(
      (token) => this.broker.call<Identity, { token: string }>("auth.resolve", { token }),
      IDENTITY_TTL_MS,
    );
    this.bus = new BusGuard(busLinkOf(this.broker), () => this.identities.clear());
    this.limiter = new RateLimiter(settings.rateLimitMax, settings.rateLimitWindowMs, () => this.gatewayNodes);
    this.orgLimiter = new RateLimiter(settings.rateLimitOrgMax, settings.rateLimitWindowMs, () => this.gatewayNodes);
    this.addressLimiter = new RateLimiter(settings.rateLimitAddressMax, settings.rateLimitWindowMs, () => this.gatewayNodes);
    this.failedAuthLimiter = new RateLimiter(settings.rateLimitMax, settings.rateLimitWindowMs, () => this.gatewayNodes);
    this.trustProxy = settings.trustProxy;
    this.bodyTimeoutMs = settings.httpBodyTimeoutMs;
    this.stopping = false;
    // moleculer-web (a mixin, created first) made the server; it listens once the service starts.
    const server = (this as unknown as { server?: Server }).server;
    if (server) this.configureServer(server, settings.httpHeadersTimeoutMs, settings.httpBodyTimeoutMs);
    this.idempotency = new Idempotency(this.idempotencyKeys, 2 * settings.requestTimeoutMs);
    this.auditLog = new AuditWriter((entries) => this.broker.call("orgs.recordAudit", { entries }));
  },

  started() {
    this.countGateways();
    this.timers = [
      setInterval(() => void this.flushUsage(), TOUCH_INTERVAL_MS),
      setInterval(() => void this.flushMeter(), METER_FLUSH_MS),
      setInterval(() => {
        this.identities.sweep();
        for (const limiter of [this.limiter, this.orgLimiter, this.addressLimiter, this.failedAuthLimiter]) limiter.sweep();
      }, SWEEP_INTERVAL_MS),
      setInterval(() => void this.idempotency.prune().catch(() => undefined), 10 * SWEEP_INTERVAL_MS),
    ];
    for (const timer of this.timers) timer.unref();
  },

  async stopped() {
    // From here every answer closes its connection and requests read later are refused (503), so
    // kept-alive clients cannot hold this node open; idle connections are closed at once.
    this.stopping = true;
    (this as unknown as { server?: Server }).server?.closeIdleConnections();
    this.closeStreams();
    for (const timer of this.timers) clearInterval(timer);
    await Promise.all([this.flushUsage(), this.flushMeter()]);
    // moleculer-web's own `stopped` (a mixin's) closes the server after this one has run; the
    // count is logged once the server has closed and every answer has been written.
    const server = (this as unknown as { server?: { listening: boolean; once(e: "close", f: () => void): void } }).server;
    const report = () => {
      const level = this.received === this.answered ? "info" : "warn";
      this.logger[level](`gateway stopped: ${this.received} requests read, ${this.answered} answered`);
    };
    if (server?.listening) server.once("close", report);
    else report();
  },
};

export default GatewayService;
