import type { OutgoingHttpHeaders } from "node:http";
import { parse as parseQuery } from "node:querystring";
import type { CallMeta } from "../../shared/api/context";
import { checkPageNumbers, checkPagingMode } from "../../shared/api/pagination";
import { grants } from "../../shared/api/scopes";
import { ApiError, ERROR_CODES } from "../../shared/errors";
import { readJsonBody } from "./body";
import { isDashboardPath } from "./dashboard";
import { Replay, type GatewayPart } from "./gateway.types";
import { toHttpError } from "./http-errors";
import { fingerprintOf } from "./idempotency";
import { inputOf } from "./request.logic";
import { locationOf, matchRoute, type RouteDef } from "./routes";

/**
 * The /v1 request path, in the order a request meets it: the address's budget, the route (routes.ts),
 * the bearer key and the route's scope (authenticate.mixin.ts), the JSON body (body.ts), an
 * idempotent replay, the action's call, the audit entry, and the answer or error in the contract's
 * shape. Services return plain data; the envelope, status codes and error shape are made here.
 */
export const PipelineMixin: GatewayPart = {
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

    paramNamesOf(action) {
      const cached = this.paramNames.get(action);
      if (cached !== undefined) return cached;
      // Every node's registry holds each action's params schema (remote ones too): read once per
      // action, again after the services change.
      const list = this.broker.registry.getActionEndpoints(action) as
        { endpoints?: { action?: { params?: Record<string, unknown> } }[] } | undefined;
      const endpoint = list?.endpoints?.[0];
      if (!endpoint) return null;
      const params = endpoint.action?.params;
      const names = params?.$$strict === true ? new Set(Object.keys(params).filter((name) => !name.startsWith("$$"))) : null;
      this.paramNames.set(action, names);
      return names;
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
      const byAddress = this.addressLimiter.hit(x.addressBudget);
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
      if (route.inbound) return this.receiveInbound(req, x, match.params.hook_id, search);

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
      checkPagingMode(query);
      // A stream (GET /listen) writes its own answer: `send` then finds the headers sent.
      if (route.stream) {
        await this.openStream(req, res, caller, x.requestId, query);
        return { status: 200, body: null };
      }
      const body = await readJsonBody(req, this.bodyTimeoutMs - (performance.now() - x.start));
      x.unreadBody = false;
      // A replay is bound to the calling key (its fingerprint holds it), after authentication and the
      // scope: another key reusing an Idempotency-Key is refused (409), never given the first answer.
      const idemKey = req.headers["idempotency-key"];
      if (req.method === "POST" && typeof idemKey === "string") {
        const tenant = { org_id: caller.org_id, environment: caller.environment };
        const begun = await this.idempotency.begin(tenant, idemKey, fingerprintOf(caller.key_id, req.method, path, search, body));
        if (begun.kind === "replay") throw new Replay(begun.status, begun.body, begun.redacted);
        x.idempotency = { id: begun.id, tenant };
      }

      // After the replay check, so that a refusal here is stored and replayed as the validator's would be.
      const input = inputOf(route.method, body, query, match.params, this.paramNamesOf(route.action));
      const meta: CallMeta = {
        auth: caller,
        api_version: x.version,
        request_id: x.requestId,
        ...(x.traceparent && { traceparent: x.traceparent }),
        ...(x.chain && { chain: x.chain }),
      };
      // Reads are safe to repeat: one that meets a dead node is retried on another (cluster only).
      const data = await this.broker.call<any, Record<string, unknown>>(route.action, input, {
        meta,
        ...(route.method === "GET" && { retries: 2 }),
      });
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
      // next ones together, which costs the gateway fewer system calls per request (figures in
      // docs/benchmarks).
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
  },
};
