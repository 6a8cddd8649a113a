import type { IncomingMessage, ServerResponse } from "node:http";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import { ApiError, ERROR_CODES } from "../../shared/errors";
import { newId } from "../../shared/ids";
import type { Identity, Invalidation } from "../../shared/identity";
import { settingsOf } from "../../shared/runtime";
import { grants } from "../../shared/scopes";
import { StoreMixin } from "../../shared/store-mixin";
import type { Store } from "../../shared/storage/types";
import { LATEST_VERSION, resolveVersion } from "../../shared/versions";
import type { CallMeta, Caller } from "../../shared/context";
import { toHttpError } from "./http-errors";
import { Idempotency, fingerprintOf, type IdempotencyDoc } from "./idempotency";
import { IdentityCache } from "./identity-cache";
import { RateLimiter, type RateDecision } from "./rate-limiter";
import { aliasesOf, methodsFor, pathParamsOf, ROUTE_BY_ACTION, ROUTES, type RouteDef } from "./routes";

const BODY_LIMIT = "1mb";
const IDENTITY_TTL_MS = 30_000;
const TOUCH_INTERVAL_MS = 5_000;
const SWEEP_INTERVAL_MS = 60_000;

/** What the gateway learns about a request along the way; kept on `req`. */
interface Exchange {
  requestId: string;
  version: string;
  status?: number;
  caller?: Caller;
  rate?: RateDecision;
  idempotency?: { id: string; tenant: { org_id: string; environment: Caller["environment"] } };
}
type Req = IncomingMessage & {
  $x: Exchange;
  $alias?: { action?: string };
  body?: unknown;
  query?: Record<string, unknown>;
  parsedUrl?: string;
  $ctx?: Context<unknown, CallMeta>;
};
type Res = ServerResponse;

interface GatewayVars {
  store: Store;
  identities: IdentityCache;
  limiter: RateLimiter;
  idempotency: Idempotency;
  gatewayNodes: number;
  usage: Map<string, { key_id: string; org_id: string; at: string }>;
  timers: NodeJS.Timeout[];
}
interface GatewayMethods {
  authenticate(ctx: Context<unknown, CallMeta>, route: unknown, req: Req, res: Res): Promise<null>;
  authorize(ctx: Context<unknown, CallMeta>, route: unknown, req: Req, res: Res): Promise<void>;
  writeJson(req: Req, res: Res, status: number, body: unknown): void;
  sendResponse(req: Req, res: Res, data: unknown): void;
  renderError(req: Req, res: Res, err: unknown): void;
  countGateways(): void;
  flushUsage(): Promise<void>;
}

const hasBody = (req: IncomingMessage): boolean =>
  req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;

const isJson = (req: IncomingMessage): boolean => /^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(req.headers["content-type"] ?? "");

/**
 * The only door: authenticates bearer keys, checks the route's scope, rate-limits per key, resolves
 * the API version, replays idempotent POSTs, and renders every answer and error in the contract's
 * shape. Services behind it return plain data.
 */
type GatewaySettings = ServiceSettingSchema & { port: number; ip: string; [option: string]: unknown };

const GatewayService: ServiceSchema<GatewaySettings, GatewayMethods, GatewayVars> = {
  name: "gateway",
  mixins: [ApiGateway as unknown as Partial<ServiceSchema>, StoreMixin],

  settings: {
    port: 3000,
    ip: "0.0.0.0",
    logRequest: null,
    logResponse: null,
    log4XXResponses: false,
    logRouteRegistration: false,
    // Every request gets its id before anything else can fail, so error answers carry it too.
    rootCallOptions(this: unknown, options: Record<string, unknown>, req: Req, res: Res) {
      const requestId = newId("req");
      req.$x = { requestId, version: LATEST_VERSION };
      res.setHeader("Request-Id", requestId);
      options.requestID = requestId;
    },
    routes: [
      {
        path: "/v1",
        mappingPolicy: "restrict",
        aliases: aliasesOf(ROUTES),
        authentication: true,
        authorization: true,
        logging: false,
        mergeParams: true,
        bodyParsers: { json: { limit: BODY_LIMIT, strict: true }, urlencoded: false },

        onBeforeCall(this: unknown, ctx: Context<unknown, CallMeta>, _route: unknown, req: Req) {
          if (hasBody(req) && !isJson(req)) {
            throw new ApiError("unsupported_media_type", "Request bodies must be JSON, sent with Content-Type: application/json");
          }
          if (req.body !== undefined && (typeof req.body !== "object" || req.body === null || Array.isArray(req.body))) {
            throw new ApiError("invalid_json", "The request body must be a JSON object");
          }
          // Path parameters win over body and query ones of the same name; refuse the clash instead of hiding it.
          const def = ROUTE_BY_ACTION.get(req.$alias?.action ?? "");
          for (const name of def ? pathParamsOf(def) : []) {
            const body = req.body as Record<string, unknown> | undefined;
            if ((body && name in body) || (req.query && name in req.query)) {
              throw new ApiError("parameter_unknown", `Received unknown parameter: ${name} (it is part of the path)`, { param: name });
            }
          }
          ctx.meta.request_id = req.$x.requestId;
        },

        async onAfterCall(this: GatewayVars & GatewayMethods, _ctx: unknown, _route: unknown, req: Req, _res: Res, data: any) {
          const x = req.$x;
          // A request whose key was revoked while it ran is refused, whatever it did.
          if (x.caller && this.identities.wasRevoked(x.caller.key_id)) {
            throw new ApiError("api_key_revoked", "This API key has been revoked");
          }
          const def = ROUTE_BY_ACTION.get(req.$alias?.action ?? "") as RouteDef;
          const status = def.status ?? 200;
          const body = def.list
            ? { data: data.items, meta: { total: data.total, page: data.page, per_page: data.per_page } }
            : { data };
          if (x.idempotency) {
            await this.idempotency.complete(x.idempotency.tenant, x.idempotency.id, status, body);
          }
          x.status = status;
          return body;
        },

        onError(this: GatewayVars & GatewayMethods, req: Req, res: Res, err: unknown) {
          this.renderError(req, res, err);
        },
      },
    ],
    onError(this: GatewayVars & GatewayMethods, req: Req, res: Res, err: unknown) {
      this.renderError(req, res, err);
    },
  },

  actions: {
    /** Internal: drop a key or an organization from this node's identity cache (see auth.invalidate). */
    invalidate: {
      visibility: "public",
      params: { key_id: { type: "string", optional: true }, org_id: { type: "string", optional: true } },
      handler(ctx: Context<Invalidation>) {
        this.identities.invalidate(ctx.params);
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
    async authenticate(ctx, _route, req) {
      const header = req.headers.authorization;
      if (!header) throw new ApiError("missing_api_key", "Send your API key as 'Authorization: Bearer <key>'");
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match) throw new ApiError("invalid_api_key", "The Authorization header must be 'Bearer <key>'");
      const identity: Identity = await this.identities.get(match[1]);
      if (identity.status === "revoked" || this.identities.wasRevoked(identity.key_id)) {
        throw new ApiError("api_key_revoked", "This API key has been revoked");
      }
      const now = Date.now();
      if (identity.expires_at !== null && Date.parse(identity.expires_at) <= now) {
        throw new ApiError("api_key_expired", `This API key expired at ${identity.expires_at}`);
      }
      const caller: Caller = {
        key_id: identity.key_id,
        org_id: identity.org_id,
        environment: identity.environment,
        scopes: identity.scopes,
      };
      const x = req.$x;
      x.caller = caller;
      x.version = resolveVersion(req.headers["service-version"] as string | undefined, identity.api_version);
      x.rate = this.limiter.hit(identity.key_id, now);
      if (!x.rate.allowed) {
        throw new ApiError("rate_limited", "Too many requests with this API key; slow down", { retry_after: x.rate.reset });
      }
      this.usage.set(identity.key_id, { key_id: identity.key_id, org_id: identity.org_id, at: new Date(now).toISOString() });
      ctx.meta.auth = caller;
      ctx.meta.api_version = x.version;
      return null;
    },

    async authorize(_ctx, _route, req) {
      const x = req.$x;
      const def = ROUTE_BY_ACTION.get(req.$alias?.action ?? "");
      const caller = x.caller as Caller;
      if (!def || !grants(caller.scopes, def.scope)) {
        const needed = def?.scope ?? "org:admin";
        throw new ApiError("insufficient_scope", `This request needs the '${needed}' scope, which your key does not hold`, {
          scope: needed,
        });
      }
      const key = req.headers["idempotency-key"];
      if (req.method === "POST" && typeof key === "string") {
        const tenant = { org_id: caller.org_id, environment: caller.environment };
        const fingerprint = fingerprintOf(req.method, req.parsedUrl ?? "", req.body);
        const begun = await this.idempotency.begin(tenant, key, fingerprint);
        if (begun.kind === "replay") throw Object.assign(new Error("replay"), { name: "IdempotentReplay", replay: begun });
        x.idempotency = { id: begun.id, tenant };
      }
    },

    /** Replaces moleculer-web's: the envelope is built in onAfterCall, the headers are ours. */
    sendResponse(req, res, data) {
      if (res.headersSent) return;
      this.writeJson(req, res, req.$x.status ?? 200, data);
    },

    writeJson(req, res, status, body) {
      const x = req.$x;
      if (x) {
        res.setHeader("Service-Version", x.version);
        if (x.rate) {
          res.setHeader("RateLimit-Limit", String(x.rate.limit));
          res.setHeader("RateLimit-Remaining", String(Math.max(0, x.rate.remaining)));
          res.setHeader("RateLimit-Reset", String(x.rate.reset));
        }
      }
      const payload = JSON.stringify(body);
      res.statusCode = status;
      res.setHeader("Content-Type", "application/json; charset=utf-8");
      res.setHeader("Content-Length", Buffer.byteLength(payload));
      res.end(payload);
    },

    renderError(req, res, err) {
      if (res.headersSent) return;
      const e = err as { name?: string; replay?: { status: number; body: unknown } };
      if (e?.name === "IdempotentReplay" && e.replay) {
        res.setHeader("Idempotent-Replayed", "true");
        this.writeJson(req, res, e.replay.status, e.replay.body);
        return;
      }
      if (!req.$x) req.$x = { requestId: newId("req"), version: LATEST_VERSION };
      const x = req.$x;
      let http = toHttpError(err);
      // Whatever became of it, a request whose key was revoked while it ran answers as revoked.
      if (x.caller && http.status !== 401 && this.identities.wasRevoked(x.caller.key_id)) {
        http = { status: 401, code: "api_key_revoked", message: "This API key has been revoked" };
      }
      if (http.code === "route_not_found") {
        const path = (req.parsedUrl ?? req.url ?? "").replace(/^\/v1(?=\/|$)/, "");
        const allowed = methodsFor(path.split("?")[0]);
        if (allowed.length > 0) {
          res.setHeader("Allow", allowed.join(", "));
          http = { status: 405, code: "method_not_allowed", message: `${req.method} is not allowed here; use ${allowed.join(", ")}` };
        } else {
          http.message = `No route ${req.method} ${req.url?.split("?")[0]}`;
        }
      }
      if (http.status >= 500 && http.code === "internal_error") {
        (this as unknown as { logger: { error: (...a: unknown[]) => void } }).logger.error("Request failed", {
          request_id: x.requestId,
          err,
        });
      }
      if (x.idempotency) {
        const { tenant, id } = x.idempotency;
        const body = { error: { type: ERROR_CODES[http.code].type, code: http.code, message: http.message, param: http.param } };
        // A 5xx may be retried with the same key; a 4xx is the request's own answer and is kept.
        void (http.status >= 500 || http.status === 429 ? this.idempotency.abandon(tenant, id) : this.idempotency.complete(tenant, id, http.status, body)).catch(() => undefined);
      }
      if (http.retryAfter !== undefined) res.setHeader("Retry-After", String(http.retryAfter));
      this.writeJson(req, res, http.status, {
        error: {
          type: ERROR_CODES[http.code].type,
          code: http.code,
          message: http.message,
          ...(http.param !== undefined && { param: http.param }),
          request_id: x.requestId,
        },
      });
    },

    countGateways() {
      const broker = (this as unknown as { broker: import("moleculer").ServiceBroker }).broker;
      const nodes = new Set(
        broker.registry
          .getServiceList({ onlyAvailable: true, skipInternal: true })
          .filter((svc) => svc.name === "gateway")
          .map((svc) => svc.nodeID),
      );
      this.gatewayNodes = Math.max(1, nodes.size);
    },

    async flushUsage() {
      if (this.usage.size === 0) return;
      const uses = [...this.usage.values()];
      this.usage.clear();
      const broker = (this as unknown as { broker: import("moleculer").ServiceBroker }).broker;
      await broker.call("keys.touch", { uses }).catch(() => undefined);
    },
  },

  created() {
    const settings = settingsOf(this.broker);
    this.settings.port = settings.port;
    this.settings.ip = settings.host;
    this.gatewayNodes = 1;
    this.usage = new Map();
    this.identities = new IdentityCache((token) => this.broker.call<Identity, { token: string }>("auth.resolve", { token }), IDENTITY_TTL_MS);
    this.limiter = new RateLimiter(settings.rateLimitMax, settings.rateLimitWindowMs, () => this.gatewayNodes);
    this.idempotency = new Idempotency(
      this.store.collection<IdempotencyDoc>("idempotency_keys", [{ fields: { expires_at: 1 } }]),
      2 * settings.requestTimeoutMs,
    );
  },

  started() {
    this.countGateways();
    this.timers = [
      setInterval(() => void this.flushUsage(), TOUCH_INTERVAL_MS),
      setInterval(() => {
        this.identities.sweep();
        this.limiter.sweep();
      }, SWEEP_INTERVAL_MS),
      setInterval(() => void this.idempotency.prune().catch(() => undefined), 10 * SWEEP_INTERVAL_MS),
    ];
    for (const timer of this.timers) timer.unref();
  },

  async stopped() {
    for (const timer of this.timers) clearInterval(timer);
    await this.flushUsage();
  },
};

export default GatewayService;
