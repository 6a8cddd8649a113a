import { isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import {
  HOOK_BODY_MAX_BYTES,
  HOOK_ID_PATTERN,
  NO_HOOK,
  takesMediaType,
  type HookReceipt,
  type HookRefusal,
  type InboundRequest,
} from "../../shared/api/hooks";
import { ApiError, ERROR_CODES } from "../../shared/errors";
import { hasBody, readRawBody } from "./body";
import type { GatewayPart } from "./gateway.types";
import { RateLimiter } from "./rate-limiter";

const SWEEP_INTERVAL_MS = 60_000;
/** Never handed on: the hook's signature is its credential, and these are a client's own. */
const DROPPED = new Set(["authorization", "cookie", "proxy-authorization"]);

/** The request's headers as the workflows service reads them: lower-case names, a repeated one joined by ", ". */
function headersOf(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || DROPPED.has(name)) continue;
    headers[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}

/**
 * `POST /v1/hooks/{hook_id}` (docs/inbound-webhooks.md): reached without an API key, so every check
 * that costs nothing comes first: the address's budget of refusals (the one unknown keys spend), the
 * id's form, the hook's own budget, the media type and length. The body is read whole, exactly as
 * sent, and handed to the workflows service, which verifies its signature from memory before anything
 * is read or stored. A refusal (401, or 404 for an id that names no active hook) spends the address's
 * budget of refusals; a verified request the hook's (so forgeries from elsewhere cannot spend a
 * provider's).
 */
export const InboundMixin: GatewayPart = {
  methods: {
    async receiveInbound(req, x, hookId, search) {
      const failures = this.failedAuthLimiter.check(x.addressBudget);
      if (!failures.allowed) {
        x.rate = failures;
        throw new ApiError("rate_limited", "Too many refused requests from this address; slow down", { retry_after: failures.reset });
      }
      if (!HOOK_ID_PATTERN.test(hookId)) {
        this.failedAuthLimiter.hit(x.addressBudget);
        throw new ApiError("resource_not_found", NO_HOOK.message, { param: "hook_id" });
      }
      const byHook = this.hookLimiter.check(hookId);
      x.rate = byHook;
      if (!byHook.allowed) throw new ApiError("rate_limited", "Too many requests to this hook; slow down", { retry_after: byHook.reset });
      let raw: Buffer = Buffer.alloc(0);
      if (hasBody(req)) {
        if (!takesMediaType(req.headers["content-type"]))
          throw new ApiError(
            "unsupported_media_type",
            "A hook takes JSON, text/*, application/x-www-form-urlencoded or application/xml bodies",
          );
        if (Number(req.headers["content-length"] ?? 0) > HOOK_BODY_MAX_BYTES)
          throw new ApiError("payload_too_large", `The request body is over ${HOOK_BODY_MAX_BYTES} bytes (64 KiB)`);
        raw = await readRawBody(req, this.bodyTimeoutMs - (performance.now() - x.start), HOOK_BODY_MAX_BYTES);
        x.unreadBody = false;
        if (!isUtf8(raw)) throw new ApiError("unsupported_media_type", "A hook's body must be UTF-8 text");
      }
      const request: InboundRequest = {
        hook_id: hookId,
        method: req.method ?? "POST",
        query: search ?? "",
        headers: headersOf(req),
        raw: raw.toString("utf8"),
      };
      const answer = await this.broker.call<HookReceipt | HookRefusal, InboundRequest>("workflows.receiveHook", request, {
        meta: { request_id: x.requestId, ...(x.traceparent && { traceparent: x.traceparent }) },
      });
      if (answer.status === 401 || answer.status === 404) {
        // Made-up ids cost a lookup each (once per id and node): they spend the address's refusals too.
        this.failedAuthLimiter.hit(x.addressBudget);
        const { code, message } = answer;
        const error = {
          type: ERROR_CODES[code].type,
          code,
          message,
          request_id: x.requestId,
          ...(code === "resource_not_found" && { param: "hook_id" }),
        };
        return { status: answer.status, body: { error } };
      }
      // Only a verified request spends the hook's budget: forgeries cannot use up a provider's.
      this.hookLimiter.hit(hookId);
      const { status, ...data } = answer;
      return { status, body: { data: { object: "hook_receipt", ...data } } };
    },
  },

  created() {
    const { config } = this.settings;
    // A hook is budgeted as one API key is (RATE_LIMIT_MAX verified requests per window, for the cluster).
    this.hookLimiter = new RateLimiter(config.rateLimitMax, config.rateLimitWindowMs, () => this.gatewayNodes);
  },

  started() {
    this.hookSweeper = setInterval(() => this.hookLimiter.sweep(), SWEEP_INTERVAL_MS);
    this.hookSweeper.unref();
  },

  stopped() {
    clearInterval(this.hookSweeper);
  },
};
