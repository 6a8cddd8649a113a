import { createHash, timingSafeEqual } from "node:crypto";
import { parse as parseQuery } from "node:querystring";
import { ApiError, invalidParam, notOneOf } from "../../shared/errors";
import { BODY_LIMITS, formatPath, parseJsonWithinLimits } from "../../shared/api/json-limits";
import { hookUrl, isJsonType } from "../../shared/api/hooks";
import { hmacSha256 } from "../../shared/net/signing";
import type { Hook, HookScheme, HookVerify, WebhookTrigger } from "../../shared/api/wire";
import { checkCondition, type Fault } from "./expressions/check";
import { compile, evaluate, toCel } from "./expressions/cel";
import { SECRET_REFERENCE, wholeTemplate } from "./templates";

/**
 * Inbound webhooks (docs/inbound-webhooks.md): the trigger as written, the signature of each scheme
 * checked against the raw body in constant time, and the request as the run's input sees it.
 */
export const HOOK_SCHEMES: readonly HookScheme[] = ["standard_webhooks", "hmac_sha256", "stripe", "github", "none"];
export const DEFAULT_TOLERANCE_S = 300;
const MAX_TOLERANCE_S = 86_400;
/** Signatures read from one header: a rotation sends two; more are not looked at. */
const MAX_CANDIDATES = 8;
/** Headers a trigger may add to the run's input. */
export const MAX_EXTRA_HEADERS = 20;
/** Request headers the run's input always holds when sent (never credentials or signatures). */
export const DEFAULT_HEADERS = [
  "content-type",
  "user-agent",
  "webhook-id",
  "webhook-timestamp",
  "x-github-event",
  "x-github-delivery",
  "x-request-id",
] as const;
const NEVER_KEPT = new Set(["authorization", "cookie", "proxy-authorization"]);
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;
const DEDUPE_KEY_MAX = 200;

const FIELDS: Record<HookScheme, readonly string[]> = {
  standard_webhooks: ["secret", "tolerance_s"],
  hmac_sha256: ["secret", "header", "prefix", "encoding"],
  stripe: ["secret", "tolerance_s"],
  github: ["secret"],
  none: [],
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const unknownField = (param: string, message: string) => new ApiError("parameter_unknown", message, { param });

function headerName(param: string, value: unknown): string {
  if (typeof value !== "string" || !HEADER_NAME.test(value))
    throw invalidParam(param, `${param} must be a header name such as "webhook-id"`);
  const name = value.toLowerCase();
  if (NEVER_KEPT.has(name)) throw invalidParam(param, `${param}: '${name}' carries credentials and is never read`);
  return name;
}

function checkVerify(raw: unknown): HookVerify {
  if (!isObject(raw))
    throw invalidParam(
      "trigger.verify",
      'a webhook trigger needs verify: {"scheme": "standard_webhooks" | "hmac_sha256" | "stripe" | "github" | "none"} ("none" must be explicit)',
    );
  const scheme = raw.scheme as HookScheme;
  if (!HOOK_SCHEMES.includes(scheme)) throw notOneOf("trigger.verify.scheme", [...HOOK_SCHEMES], raw.scheme);
  const extra = Object.keys(raw).find((k) => k !== "scheme" && !FIELDS[scheme].includes(k));
  if (extra !== undefined)
    throw unknownField(formatPath([extra], "trigger.verify"), `the ${scheme} scheme has no field ${JSON.stringify(extra)}`);
  const verify: HookVerify = { scheme };
  if (raw.secret !== undefined) {
    const inner = typeof raw.secret === "string" ? wholeTemplate(raw.secret.trim()) : null;
    if (typeof raw.secret !== "string" || inner === null || !SECRET_REFERENCE.test(inner))
      throw invalidParam(
        "trigger.verify.secret",
        "trigger.verify.secret must be a stored secret as {{secrets.NAME}}; leave it out and the platform makes one, shown once",
      );
    verify.secret = raw.secret.trim();
  }
  if (scheme === "hmac_sha256") {
    verify.header = raw.header === undefined ? "x-signature" : headerName("trigger.verify.header", raw.header);
    if (raw.prefix !== undefined && (typeof raw.prefix !== "string" || !/^[\x21-\x7e]{0,50}$/.test(raw.prefix)))
      throw invalidParam("trigger.verify.prefix", 'trigger.verify.prefix must be up to 50 visible characters, such as "sha256="');
    verify.prefix = (raw.prefix as string | undefined) ?? "";
    if (raw.encoding !== undefined && raw.encoding !== "hex" && raw.encoding !== "base64")
      throw notOneOf("trigger.verify.encoding", ["hex", "base64"], raw.encoding);
    verify.encoding = (raw.encoding as "hex" | "base64" | undefined) ?? "hex";
  }
  if (scheme === "standard_webhooks" || scheme === "stripe") {
    const t = raw.tolerance_s ?? DEFAULT_TOLERANCE_S;
    if (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > MAX_TOLERANCE_S)
      throw invalidParam(
        "trigger.verify.tolerance_s",
        `trigger.verify.tolerance_s must be a whole number of seconds from 1 to ${MAX_TOLERANCE_S}`,
      );
    verify.tolerance_s = t;
  }
  return verify;
}

/** A webhook trigger, checked, with its defaults: every error names the field. */
export function checkWebhookTrigger(raw: Record<string, unknown>): WebhookTrigger {
  const extra = Object.keys(raw).find((k) => !["type", "verify", "dedupe", "filter", "headers"].includes(k));
  if (extra !== undefined) throw unknownField(formatPath([extra], "trigger"), `a webhook trigger has no field ${JSON.stringify(extra)}`);
  const trigger: WebhookTrigger = { type: "webhook", verify: checkVerify(raw.verify) };
  if (raw.dedupe !== undefined) {
    if (!isObject(raw.dedupe) || Object.keys(raw.dedupe).some((k) => k !== "header"))
      throw invalidParam("trigger.dedupe", 'trigger.dedupe must be {"header": "<name>"}, such as {"header": "webhook-id"}');
    trigger.dedupe = { header: headerName("trigger.dedupe.header", raw.dedupe.header) };
  }
  if (raw.headers !== undefined) {
    if (!Array.isArray(raw.headers) || raw.headers.length > MAX_EXTRA_HEADERS)
      throw invalidParam("trigger.headers", `trigger.headers must be a list of at most ${MAX_EXTRA_HEADERS} header names`);
    trigger.headers = [...new Set(raw.headers.map((h, i) => headerName(`trigger.headers[${i}]`, h)))];
  }
  if (raw.filter !== undefined) {
    const fault: Fault = (field, message) => invalidParam(`trigger.${field}`, `trigger.${field}: ${message}`);
    trigger.filter = checkCondition(fault, "filter", raw.filter, "request");
  }
  return trigger;
}

/** The stored secret a trigger names (`{{secrets.NAME}}`), or null when the platform's own is used. */
export function secretNameOf(verify: HookVerify): string | null {
  if (verify.secret === undefined) return null;
  return SECRET_REFERENCE.exec(wholeTemplate(verify.secret) ?? "")?.[1] ?? null;
}

/** Why a request was refused 401. */
export type Refusal = "missing_signature" | "malformed_signature" | "bad_signature" | "stale_timestamp" | "secret_unavailable";

export const REFUSAL_MESSAGES: Record<Refusal, string> = {
  missing_signature: "The request carries no signature in the headers this hook's scheme reads",
  malformed_signature: "The request's signature headers are malformed",
  bad_signature: "The request's signature does not match its body",
  stale_timestamp: "The request's signed timestamp is outside the hook's tolerance",
  secret_unavailable: "The request's signature cannot be checked",
};

const headerOf = (headers: Record<string, string>, name: string): string | undefined => headers[name];

/** Whether any candidate equals the expected digest, compared in constant time (equal lengths only reach the compare). */
function anyEqual(expected: Buffer[], candidates: Buffer[]): boolean {
  let found = false;
  for (const want of expected) for (const got of candidates) if (got.length === want.length && timingSafeEqual(got, want)) found = true;
  return found;
}

const HEX_DIGEST = /^[0-9a-fA-F]{64}$/;
const BASE64_DIGEST = /^[A-Za-z0-9+/]{43}=$/;
const decode = (value: string, encoding: "hex" | "base64"): Buffer | null =>
  encoding === "hex"
    ? HEX_DIGEST.test(value)
      ? Buffer.from(value, "hex")
      : null
    : BASE64_DIGEST.test(value)
      ? Buffer.from(value, "base64")
      : null;

function timely(seconds: string, toleranceS: number, nowMs: number): Refusal | null {
  if (!/^\d{1,12}$/.test(seconds)) return "malformed_signature";
  return Math.abs(nowMs - Number(seconds) * 1000) > toleranceS * 1000 ? "stale_timestamp" : null;
}

/**
 * Checks `raw` (the body exactly as received) against the request's signature headers (lower-case
 * names) under any of `secrets` (the current one, then one a rotation replaced): null when it
 * verifies, else why not. Each digest is recomputed and compared in constant time.
 */
export function verifyRequest(
  verify: HookVerify,
  secrets: readonly string[],
  headers: Record<string, string>,
  raw: string,
  nowMs: number,
): Refusal | null {
  if (verify.scheme === "none") return null;
  if (secrets.length === 0) return "secret_unavailable";
  switch (verify.scheme) {
    case "standard_webhooks": {
      const id = headerOf(headers, "webhook-id");
      const ts = headerOf(headers, "webhook-timestamp");
      const sig = headerOf(headers, "webhook-signature");
      if (id === undefined || ts === undefined || sig === undefined) return "missing_signature";
      const late = timely(ts, verify.tolerance_s ?? DEFAULT_TOLERANCE_S, nowMs);
      if (late) return late;
      const candidates = sig
        .split(" ")
        .slice(0, MAX_CANDIDATES)
        .flatMap((part) => {
          const [version, value] = part.split(",", 2);
          const digest = version === "v1" && value !== undefined ? decode(value, "base64") : null;
          return digest ? [digest] : [];
        });
      if (candidates.length === 0) return "malformed_signature";
      const expected = secrets.map((s) => hmacSha256(s, `${id}.${ts}.${raw}`, "standard"));
      return anyEqual(expected, candidates) ? null : "bad_signature";
    }
    case "stripe": {
      const header = headerOf(headers, "stripe-signature");
      if (header === undefined) return "missing_signature";
      const pairs = header
        .split(",")
        .slice(0, MAX_CANDIDATES + 1)
        .map((p) => p.trim().split("=", 2));
      const t = pairs.find(([k]) => k === "t")?.[1];
      const candidates = pairs.flatMap(([k, v]) => (k === "v1" && v !== undefined ? [decode(v, "hex")] : [])).filter((d) => d !== null);
      if (t === undefined || candidates.length === 0) return "malformed_signature";
      const late = timely(t, verify.tolerance_s ?? DEFAULT_TOLERANCE_S, nowMs);
      if (late) return late;
      const expected = secrets.map((s) => hmacSha256(s, `${t}.${raw}`, "utf8"));
      return anyEqual(expected, candidates) ? null : "bad_signature";
    }
    case "github":
    case "hmac_sha256": {
      const github = verify.scheme === "github";
      const header = headerOf(headers, github ? "x-hub-signature-256" : (verify.header ?? "x-signature"));
      if (header === undefined) return "missing_signature";
      const prefix = github ? "sha256=" : (verify.prefix ?? "");
      const encoding = github ? "hex" : (verify.encoding ?? "hex");
      // A list (`sha256=<new>, sha256=<old>`, as this platform signs during a rotation) matches on any element.
      const candidates = header
        .split(",")
        .slice(0, MAX_CANDIDATES)
        .flatMap((part) => {
          const value = part.trim();
          const digest = value.startsWith(prefix) ? decode(value.slice(prefix.length), encoding) : null;
          return digest ? [digest] : [];
        });
      if (candidates.length === 0) return "malformed_signature";
      const expected = secrets.map((s) => hmacSha256(s, raw, "utf8"));
      return anyEqual(expected, candidates) ? null : "bad_signature";
    }
  }
}

/** The request as the filter and the run see it: `{method, query, headers (allow-listed), body}`. */
export interface RequestView {
  method: string;
  query: Record<string, unknown>;
  headers: Record<string, string>;
  /** Parsed when sent as JSON (and valid), else the text; null without a body. */
  body: unknown;
}

export function requestView(
  req: { method: string; query: string; headers: Record<string, string>; raw: string },
  trigger: WebhookTrigger,
): RequestView {
  const kept = new Set<string>([...DEFAULT_HEADERS, ...(trigger.headers ?? []), ...(trigger.dedupe ? [trigger.dedupe.header] : [])]);
  const headers: Record<string, string> = {};
  for (const name of kept) if (req.headers[name] !== undefined) headers[name] = req.headers[name];
  let body: unknown = req.raw === "" ? null : req.raw;
  if (req.raw !== "" && isJsonType(req.headers["content-type"])) {
    const parsed = parseJsonWithinLimits(req.raw, BODY_LIMITS);
    if (parsed.ok) body = parsed.value;
  }
  return { method: req.method, query: { ...parseQuery(req.query) }, headers, body };
}

/** Whether the request passes the trigger's filter (CEL over `request`); a filter that fails passes nothing. */
export function passesFilter(trigger: WebhookTrigger, request: RequestView): { ok: boolean; why?: string } {
  if (trigger.filter === undefined) return { ok: true };
  const source = wholeTemplate(trigger.filter.trim()) ?? trigger.filter;
  try {
    const value = evaluate(compile(source, "request"), { request: toCel(request) });
    if (typeof value === "boolean") return { ok: value };
    return { ok: false, why: `the filter gave ${JSON.stringify(value)}, not true or false` };
  } catch (err) {
    return { ok: false, why: `the filter failed: ${(err as Error).message}` };
  }
}

/** The dedupe header's value as a run's key: a long one by its digest. Null when the trigger dedupes nothing or the header is absent. */
export function dedupeKeyOf(trigger: WebhookTrigger, headers: Record<string, string>): string | null {
  const value = trigger.dedupe ? headers[trigger.dedupe.header]?.trim() : undefined;
  if (!value) return null;
  return value.length <= DEDUPE_KEY_MAX ? value : `sha256:${createHash("sha256").update(value).digest("hex")}`;
}

/** A hook as stored on its workflow: the platform's secret (none with `{{secrets.NAME}}` or scheme none) and its counts. */
export interface HookDoc {
  id: string;
  secret?: string;
  /** The secret a rotation replaced, accepted beside the new one until `expires_at`. */
  previous_secret?: { secret: string; expires_at: string };
  accepted?: number;
  filtered?: number;
  duplicates?: number;
  refused?: number;
  last_accepted_at?: string;
  last_refused_at?: string;
  last_refused_reason?: string;
}

/** The platform's secrets a hook accepts now: the current one, and the replaced one during its overlap. */
export function hookSecrets(hook: HookDoc, nowMs: number): string[] {
  if (!hook.secret) return [];
  const previous = hook.previous_secret;
  return previous && Date.parse(previous.expires_at) > nowMs ? [hook.secret, previous.secret] : [hook.secret];
}

export function hookView(hook: HookDoc, verify: HookVerify, nowMs = Date.now()): Hook {
  const name = secretNameOf(verify);
  const previous = hook.previous_secret && Date.parse(hook.previous_secret.expires_at) > nowMs ? hook.previous_secret.expires_at : null;
  return {
    id: hook.id,
    url: hookUrl(hook.id),
    secret_source: verify.scheme === "none" ? null : name === null ? "generated" : `secrets.${name}`,
    previous_secret_expires_at: previous,
    accepted: hook.accepted ?? 0,
    filtered: hook.filtered ?? 0,
    duplicates: hook.duplicates ?? 0,
    refused: hook.refused ?? 0,
    last_accepted_at: hook.last_accepted_at ?? null,
    last_refused_at: hook.last_refused_at ?? null,
    last_refused_reason: hook.last_refused_reason ?? null,
  };
}

/**
 * The hook a workflow with `trigger` holds after a write, from the one it held (`current`): none
 * for another trigger; else the same id, with the platform's secret when the scheme needs one and
 * names no stored secret. `shown`: a secret made by this write, answered once.
 */
export function planHook(
  trigger: { type: string; verify?: HookVerify },
  current: HookDoc | undefined,
  ids: { hookId: () => string; secret: () => string },
): { hook: HookDoc | undefined; shown: string | undefined } {
  if (trigger.type !== "webhook" || !trigger.verify) return { hook: undefined, shown: undefined };
  const needsOwn = trigger.verify.scheme !== "none" && trigger.verify.secret === undefined;
  const base: HookDoc = current ? { ...current } : { id: ids.hookId() };
  if (!needsOwn) {
    delete base.secret;
    delete base.previous_secret;
    return { hook: base, shown: undefined };
  }
  if (base.secret) return { hook: base, shown: undefined };
  const secret = ids.secret();
  return { hook: { ...base, secret }, shown: secret };
}
