import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from "node:http";
import type { ServiceBroker, ServiceSchema } from "moleculer";
import type { Caller } from "../../shared/api/context";
import type { FailureLog } from "../../shared/runtime/failure-log";
import type { Metrics } from "../../shared/runtime/metrics";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { declareStore, type StoreVars } from "../../shared/runtime/store.mixin";
import { collectionSpec } from "../../shared/storage/types";
import type { AuditWriter } from "./audit";
import type { BusGuard } from "./bus-guard";
import type { dashboardServer } from "./dashboard";
import type { Idempotency, IdempotencyDoc } from "./idempotency";
import type { IdentityCache } from "./identity-cache";
import type { ListenMethods, ListenVars } from "./listen.mixin";
import type { Meter } from "./meter";
import type { RateDecision, RateLimiter } from "./rate-limiter";
import type { AuditSpec } from "./routes";
import type { Chain } from "../../shared/records/chain";

/** What the gateway learns about one request along the way. */
export interface Exchange {
  requestId: string;
  /** The client's traceparent, when valid: passed on to what the request starts. */
  traceparent?: string;
  /** A workflow run's chain (its http step's `Service-Chain`), when well-formed: passed on to the event it posts. */
  chain?: Chain;
  version: string;
  /** performance.now() when the request came in. */
  start: number;
  method: string;
  /** The client's address: the socket's, or X-Forwarded-For's last with TRUST_PROXY. */
  address: string;
  /** The key of the address's budgets: an IPv6 address's /64 (request.logic.ts addressKey). */
  addressBudget: string;
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

/** A sentinel carrying a stored answer out of the idempotency check. */
export class Replay {
  constructor(
    readonly status: number,
    readonly body: unknown,
    /** The field of `data` whose secret was not kept (answered as null). */
    readonly redacted: string | null,
  ) {}
}

export const STORE = declareStore({
  owns: { idempotencyKeys: collectionSpec<IdempotencyDoc>("idempotency_keys", [{ fields: { expires_at: 1 } }]) },
});

export type GatewaySettings = PlatformSettings & { port: number; ip: string };

export interface GatewayVars extends StoreVars<typeof STORE>, ListenVars {
  broker: ServiceBroker;
  /** The HTTP server (http-server.mixin.ts); tests read its port. */
  server: Server;
  identities: IdentityCache;
  /** Drops the cache on every reconnect to NATS; 503 while NATS is out of reach (see bus-guard.ts). */
  bus: BusGuard;
  limiter: RateLimiter;
  /** Every key of an organization together. */
  orgLimiter: RateLimiter;
  /** Every request from one client address, with a key or without (/health and /ready too). */
  addressLimiter: RateLimiter;
  /** Requests from one client address answered 401 (no key, a malformed or unknown one, a bad hook signature): a key's budget. */
  failedAuthLimiter: RateLimiter;
  /** Requests to one inbound hook (inbound.mixin.ts), valid or not: a key's budget. */
  hookLimiter: RateLimiter;
  hookSweeper: NodeJS.Timeout | undefined;
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
  /** Each action's top-level parameter names, read from the registry (pipeline.mixin.ts). */
  paramNames: Map<string, ReadonlySet<string> | null>;
}

export interface GatewayMethods extends ListenMethods {
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
  /** The top-level parameters an action declares, or null when it takes any (no strict schema known here). */
  paramNamesOf(action: string): ReadonlySet<string> | null;
  authenticate(req: IncomingMessage, x: Exchange): Promise<Caller>;
  /** POST /v1/hooks/{hook_id}: no key; the raw request to the workflows service (inbound.mixin.ts). */
  receiveInbound(req: IncomingMessage, x: Exchange, hookId: string, search: string | null): Promise<{ status: number; body: unknown }>;
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

/** One concern of the gateway, written against the whole service's settings, variables and methods. */
export type GatewayPart = Partial<ServiceSchema<GatewaySettings, GatewayMethods, GatewayVars>>;
