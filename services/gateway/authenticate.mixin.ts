import { ApiError } from "../../shared/errors";
import { newId } from "../../shared/ids";
import type { Caller } from "../../shared/api/context";
import type { Identity } from "../../shared/api/identity";
import { REQUEST_ID_PATTERN, validTraceparent } from "../../shared/runtime/trace";
import { LATEST_VERSION, resolveVersion } from "../../shared/api/versions";
import { hasBody } from "./body";
import type { GatewayPart } from "./gateway.types";
import { toHttpError } from "./http-errors";
import { addressKey } from "./request.logic";
import { chainOf, SERVICE_CHAIN_HEADER } from "../../shared/records/chain";

/** Far longer than any key (API_KEY_PATTERN, shared/api/identity.ts): refused without asking the auth service. */
const MAX_TOKEN_LENGTH = 200;

/**
 * Who asks: the request's bookkeeping (id, trace, client address) and its bearer key, resolved
 * through the identity cache, with the budgets that key, its organization and its address spend.
 */
export const AuthenticateMixin: GatewayPart = {
  methods: {
    async authenticate(req, x) {
      // An address whose requests were refused 401 a key's budget of times this window waits for the
      // next one: unknown keys cost a lookup each.
      const failures = this.failedAuthLimiter.check(x.addressBudget);
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
        if (toHttpError(err).status === 401) this.failedAuthLimiter.hit(x.addressBudget);
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
      const address = this.clientAddress(req);
      return {
        requestId: typeof given === "string" && REQUEST_ID_PATTERN.test(given) ? given : newId("req"),
        ...(traceparent && { traceparent }),
        ...(chain && { chain }),
        version: LATEST_VERSION,
        start: performance.now(),
        method: req.method ?? "GET",
        address,
        addressBudget: addressKey(address),
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
  },
};
