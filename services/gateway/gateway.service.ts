import type { Context, ServiceSchema } from "moleculer";
import { IDENTITY_TTL_MS, type Identity, type Invalidation } from "../../shared/api/identity";
import { FailureLog } from "../../shared/runtime/failure-log";
import { Metrics } from "../../shared/runtime/metrics";
import { StoreMixin } from "../../shared/runtime/store.mixin";
import { AuditWriter } from "./audit";
import { AuthenticateMixin } from "./authenticate.mixin";
import { BusGuard, busLinkOf } from "./bus-guard";
import { dashboardServer, defaultDashboardDir } from "./dashboard";
import { STORE, type GatewayMethods, type GatewaySettings, type GatewayVars } from "./gateway.types";
import { HttpServerMixin } from "./http-server.mixin";
import { Idempotency } from "./idempotency";
import { IdentityCache } from "./identity-cache";
import { InboundMixin } from "./inbound.mixin";
import { ListenMixin } from "./listen.mixin";
import { Meter } from "./meter";
import { PipelineMixin } from "./pipeline.mixin";
import { RateLimiter } from "./rate-limiter";
import { ReadinessMixin } from "./readiness.mixin";
import { RecordsMixin } from "./records.mixin";

const TOUCH_INTERVAL_MS = 5_000;
/** Usage leaves for the analytics service every second; ten minutes of batches wait for it at most. */
const METER_FLUSH_MS = 1_000;
const METER_MAX_BATCHES = 600;
const SWEEP_INTERVAL_MS = 60_000;

/**
 * The public HTTP API: the only way in from outside. The gateway owns its node:http server
 * (http-server.mixin.ts) and the /v1 request path (pipeline.mixin.ts): route by the table in
 * routes.ts, read the JSON body, authenticate the bearer key and check the route's scope
 * (authenticate.mixin.ts), rate-limit, resolve the API version, replay idempotent POSTs, call the
 * action and render every answer and error in the contract's shape. Beside it: `GET /ready`
 * (readiness.mixin.ts), the audit log, usage and key-use records (records.mixin.ts), and
 * `GET /v1/listen` streams (listen.mixin.ts). Services return plain data.
 */
const GatewayService: ServiceSchema<GatewaySettings, GatewayMethods, GatewayVars> = {
  name: "gateway",
  mixins: [
    HttpServerMixin,
    StoreMixin(STORE),
    ListenMixin,
    PipelineMixin,
    InboundMixin,
    AuthenticateMixin,
    ReadinessMixin,
    RecordsMixin,
  ] as Partial<ServiceSchema>[],

  settings: {
    port: 3000,
    ip: "0.0.0.0",
  } as GatewaySettings, // the platform's part (PlatformSettings) is added by app/broker.ts

  actions: {
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
      this.paramNames.clear();
    },
    // After a reconnect this node may have missed invalidations: start from the store again.
    "$transporter.connected"() {
      this.identities.clear();
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
    this.paramNames = new Map();
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
    this.server.closeIdleConnections();
    this.closeStreams();
    for (const timer of this.timers) clearInterval(timer);
    await Promise.all([this.flushUsage(), this.flushMeter()]);
    // The server mixin's `stopped` closes the server after this one has run; the count is logged
    // once the server has closed and every answer has been written.
    const server = this.server;
    const report = () => {
      const level = this.received === this.answered ? "info" : "warn";
      this.logger[level](`gateway stopped: ${this.received} requests read, ${this.answered} answered`);
    };
    if (server?.listening) server.once("close", report);
    else report();
  },
};

export default GatewayService;
