import { existsSync } from "node:fs";
import { isIP } from "node:net";

/**
 * Every setting the platform reads from the environment, parsed and checked once at start.
 * A bad value stops the process with a message naming the setting.
 */
export const SERVICE_NAMES = [
  "gateway",
  "auth",
  "keys",
  "orgs",
  "workflows",
  "events",
  "webhooks",
  "webhook-dispatcher",
  "analytics",
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** Every environment variable loadSettings reads (a test holds the two together, and the README's table). */
export const SETTING_NAMES = [
  "PORT",
  "HOST",
  "TRANSPORTER",
  "SERVICES",
  "MONGO_URL",
  "DATA_DIR",
  "NODE_ID",
  "LOG_LEVEL",
  "REQUEST_TIMEOUT_MS",
  "RATE_LIMIT_MAX",
  "RATE_LIMIT_WINDOW_MS",
  "RATE_LIMIT_ORG_MAX",
  "RATE_LIMIT_ADDRESS_MAX",
  "TRUST_PROXY",
  "HTTP_HEADERS_TIMEOUT_MS",
  "HTTP_BODY_TIMEOUT_MS",
  "WEBHOOK_TIMEOUT_MS",
  "WEBHOOK_RETRY_DELAYS_MS",
  "WEBHOOK_ALLOW_PRIVATE_TARGETS",
  "WORKFLOW_RETRY_BASE_MS",
  "RUN_STARTS_PER_MINUTE",
  "RUN_DESCENDANTS_MAX",
  "STORAGE_QUOTA_BYTES",
  "USAGE_RETENTION_DAYS",
  "EVENT_RETENTION_DAYS",
  "AUDIT_RETENTION_DAYS",
  "METRICS_PORT",
  "METRICS_HOST",
  "NATS_USER",
  "NATS_PASSWORD",
  "NATS_TOKEN",
  "NATS_TLS_CA",
  "NATS_TLS_CERT",
  "NATS_TLS_KEY",
  "SECRETS_KEYS",
] as const;

export interface Settings {
  port: number;
  host: string;
  transporter: string | undefined;
  services: ServiceName[];
  mongoUrl: string | undefined;
  dataDir: string;
  nodeId: string | undefined;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | false;
  requestTimeoutMs: number;
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /** Requests per organization (all its keys, both environments) per window; default 10 × rateLimitMax. */
  rateLimitOrgMax: number;
  /** Requests per client address per window, with or without a key (/health and /ready too); default 10 × rateLimitMax. */
  rateLimitAddressMax: number;
  /** The gateway is behind a proxy that appends the client's address to X-Forwarded-For: take the last one. */
  trustProxy: boolean;
  /** Time a client has to send a request's headers, and then its whole body (from its arrival). */
  httpHeadersTimeoutMs: number;
  httpBodyTimeoutMs: number;
  webhookTimeoutMs: number;
  webhookRetryDelaysMs: number[];
  webhookAllowPrivateTargets: boolean;
  workflowRetryBaseMs: number;
  /** Runs started per minute in one environment of an organization: through the API, 429 beyond; by events, they wait for the next minute. */
  runStartsPerMinute: number;
  /** Runs that may descend from one root run through run_workflow steps: at most 10,000 (docs/decisions/0118-child-run-limits.md). */
  runDescendantsMax: number;
  /** Bytes of documents one environment of an organization may store (docs/security/storage-quota.md). */
  storageQuotaBytes: number;
  usageRetentionDays: number;
  /** Events, webhook deliveries and finished runs older than this many days are pruned (see shared/records/retention.ts). */
  eventRetentionDays: number;
  /** Audit log entries older than this many days are pruned (the orgs service owns them). */
  auditRetentionDays: number;
  /** Prometheus metrics on this port (`/metrics`); unset: off. */
  metricsPort: number | undefined;
  /** The address the metrics listener binds: METRICS_HOST, else HOST (where the API listens). */
  metricsHost: string;
  /** How this node proves itself to nats-server, and checks the server (TLS). */
  nats: NatsAuth;
  /** The keys that encrypt stored secrets (AES-256-GCM), the current one first; empty: secrets are off. */
  secretsKeys: SecretsKey[];
}

/** One key of SECRETS_KEYS: its id (stored beside each value it encrypts) and its 32 bytes, base64. */
export interface SecretsKey {
  id: string;
  key: string;
}

/** NATS credentials (a user and password, or a token) and TLS files; all unset: none. */
export interface NatsAuth {
  user?: string;
  password?: string;
  token?: string;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

export class SettingsError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`Invalid setting ${setting}: ${message}`);
    this.name = "SettingsError";
  }
}

type Env = Record<string, string | undefined>;

/** The default of STORAGE_QUOTA_BYTES: 1 GiB per organization and environment. */
export const DEFAULT_STORAGE_QUOTA_BYTES = 1024 * 1024 * 1024;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new SettingsError(name, `'${raw}' is not a whole number`);
  const value = Number(raw);
  if (value < min || value > max) throw new SettingsError(name, `${value} is outside ${min}..${max}`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw new SettingsError(name, `'${raw}' is not true or false`);
}

function services(env: Env): ServiceName[] {
  const raw = env.SERVICES;
  if (raw === undefined || raw.trim() === "" || raw.trim() === "all") return [...SERVICE_NAMES];
  const names = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const known: readonly string[] = SERVICE_NAMES;
  for (const name of names) {
    if (!known.includes(name)) throw new SettingsError("SERVICES", `unknown service '${name}' (known: ${known.join(", ")})`);
  }
  return [...new Set(names)] as ServiceName[];
}

function metricsHost(env: Env, host: string): string {
  const raw = env.METRICS_HOST?.trim() || host;
  if (isIP(raw) === 0 && raw !== "localhost") throw new SettingsError("METRICS_HOST", `'${raw}' is not an IP address`);
  return raw;
}

function natsAuth(env: Env): NatsAuth {
  const text = (name: string) => env[name]?.trim() || undefined;
  const [user, password, token] = [text("NATS_USER"), env.NATS_PASSWORD || undefined, env.NATS_TOKEN || undefined];
  if (token !== undefined && (user !== undefined || password !== undefined)) {
    throw new SettingsError("NATS_TOKEN", "give either NATS_TOKEN or NATS_USER and NATS_PASSWORD, not both");
  }
  if ((user === undefined) !== (password === undefined)) {
    throw new SettingsError(user === undefined ? "NATS_USER" : "NATS_PASSWORD", "NATS_USER and NATS_PASSWORD go together");
  }
  const file = (name: string) => {
    const path = text(name);
    if (path !== undefined && !existsSync(path)) throw new SettingsError(name, `no file at '${path}'`);
    return path;
  };
  const [caFile, certFile, keyFile] = [file("NATS_TLS_CA"), file("NATS_TLS_CERT"), file("NATS_TLS_KEY")];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new SettingsError(certFile === undefined ? "NATS_TLS_CERT" : "NATS_TLS_KEY", "NATS_TLS_CERT and NATS_TLS_KEY go together");
  }
  const tls = caFile || certFile ? { ...(caFile && { caFile }), ...(certFile && { certFile, keyFile }) } : undefined;
  return { ...(user && { user, password }), ...(token && { token }), ...(tls && { tls }) };
}

/** `kid1:base64,kid2:base64`, the key that encrypts first; the others only decrypt (a rotation in progress). */
function secretsKeys(env: Env): SecretsKey[] {
  const raw = env.SECRETS_KEYS?.trim();
  if (!raw) return [];
  const keys = raw.split(",").map((entry) => {
    const match = /^([A-Za-z0-9_-]{1,32}):([A-Za-z0-9+/]+={0,2})$/.exec(entry.trim());
    if (!match) throw new SettingsError("SECRETS_KEYS", "each key is '<id>:<32 bytes in base64>' (id: letters, digits, _ or -)");
    if (Buffer.from(match[2], "base64").length !== 32)
      throw new SettingsError("SECRETS_KEYS", `key '${match[1]}' is not 32 bytes (make one with: openssl rand -base64 32)`);
    return { id: match[1], key: match[2] };
  });
  const ids = keys.map((k) => k.id);
  const twice = ids.find((id, i) => ids.indexOf(id) !== i);
  if (twice !== undefined) throw new SettingsError("SECRETS_KEYS", `key id '${twice}' is given twice`);
  return keys;
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace"] as const;

export function loadSettings(env: Env = process.env): Settings {
  const transporter = env.TRANSPORTER?.trim() || undefined;
  if (transporter !== undefined && !/^nats:\/\/[^\s]+$/.test(transporter)) {
    throw new SettingsError("TRANSPORTER", `'${transporter}' is not a nats:// URL`);
  }
  const mongoUrl = env.MONGO_URL?.trim() || undefined;
  if (mongoUrl !== undefined && !/^mongodb(\+srv)?:\/\/\S+$/.test(mongoUrl)) {
    throw new SettingsError("MONGO_URL", `'${mongoUrl}' is not a mongodb:// URL`);
  }
  const delaysRaw = env.WEBHOOK_RETRY_DELAYS_MS?.trim() || "90000,360000,1440000,5760000";
  const delays = delaysRaw.split(",").map((s) => s.trim());
  if (delays.length !== 4 || delays.some((d) => !/^\d+$/.test(d))) {
    throw new SettingsError("WEBHOOK_RETRY_DELAYS_MS", `'${delaysRaw}' must be four comma-separated whole numbers of ms`);
  }
  const logLevelRaw = (env.LOG_LEVEL ?? "info").trim();
  if (logLevelRaw !== "false" && !(LOG_LEVELS as readonly string[]).includes(logLevelRaw)) {
    throw new SettingsError("LOG_LEVEL", `'${logLevelRaw}' is not one of ${LOG_LEVELS.join(", ")}, false`);
  }
  const rateLimitMax = int(env, "RATE_LIMIT_MAX", 100, 1, 10_000_000);
  return {
    port: int(env, "PORT", 3000, 0, 65535),
    host: env.HOST?.trim() || "0.0.0.0",
    transporter,
    services: services(env),
    mongoUrl,
    dataDir: env.DATA_DIR?.trim() || "./data",
    nodeId: env.NODE_ID?.trim() || undefined,
    logLevel: logLevelRaw === "false" ? false : (logLevelRaw as Settings["logLevel"]),
    requestTimeoutMs: int(env, "REQUEST_TIMEOUT_MS", 15000, 100, 600000),
    rateLimitMax,
    rateLimitWindowMs: int(env, "RATE_LIMIT_WINDOW_MS", 1000, 100, 3_600_000),
    rateLimitOrgMax: int(env, "RATE_LIMIT_ORG_MAX", 10 * rateLimitMax, 1, 100_000_000),
    rateLimitAddressMax: int(env, "RATE_LIMIT_ADDRESS_MAX", 10 * rateLimitMax, 1, 100_000_000),
    trustProxy: bool(env, "TRUST_PROXY", false),
    httpHeadersTimeoutMs: int(env, "HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, 600_000),
    httpBodyTimeoutMs: int(env, "HTTP_BODY_TIMEOUT_MS", 30_000, 100, 600_000),
    webhookTimeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 10000, 1, 600000),
    webhookRetryDelaysMs: delays.map(Number),
    webhookAllowPrivateTargets: bool(env, "WEBHOOK_ALLOW_PRIVATE_TARGETS", false),
    workflowRetryBaseMs: int(env, "WORKFLOW_RETRY_BASE_MS", 1000, 1, 600000),
    runStartsPerMinute: int(env, "RUN_STARTS_PER_MINUTE", 6000, 1, 10_000_000),
    runDescendantsMax: int(env, "RUN_DESCENDANTS_MAX", 10_000, 1, 10_000),
    storageQuotaBytes: int(env, "STORAGE_QUOTA_BYTES", DEFAULT_STORAGE_QUOTA_BYTES, 1, Number.MAX_SAFE_INTEGER),
    usageRetentionDays: int(env, "USAGE_RETENTION_DAYS", 90, 1, 3650),
    eventRetentionDays: int(env, "EVENT_RETENTION_DAYS", 30, 1, 3650),
    auditRetentionDays: int(env, "AUDIT_RETENTION_DAYS", 365, 1, 3650),
    metricsPort: env.METRICS_PORT?.trim() ? int(env, "METRICS_PORT", 0, 1, 65535) : undefined,
    metricsHost: metricsHost(env, env.HOST?.trim() || "0.0.0.0"),
    nats: natsAuth(env),
    secretsKeys: secretsKeys(env),
  };
}
