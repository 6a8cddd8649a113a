import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { createHash } from "node:crypto";
import { ApiError } from "../../shared/errors";
import type { Identity, Invalidation } from "../../shared/identity";

const KEY_SHAPE = /^svc_(live|test)_[0-9A-Za-z]{32}$/;
/** A gateway that cannot confirm within this time is unreachable; its short cache TTL bounds the risk. */
const INVALIDATE_TIMEOUT_MS = 2000;

interface StoredKey {
  id: string;
  org_id: string;
  environment: Identity["environment"];
  scopes: string[];
  status: Identity["status"];
  expires_at: string | null;
}

/**
 * Authentication: turns a bearer token into an identity, and makes sure every gateway node forgets
 * a key (or an organization's settings) before a revocation is answered.
 */
const AuthService: ServiceSchema<ServiceSettingSchema> = {
  name: "auth",

  actions: {
    /** Internal, for gateways: the identity behind a token, revoked ones included (so they get 401 api_key_revoked). */
    resolve: {
      visibility: "public",
      params: { token: { type: "string", max: 200 } },
      async handler(ctx: Context<{ token: string }>): Promise<Identity> {
        const { token } = ctx.params;
        if (!KEY_SHAPE.test(token)) throw new ApiError("invalid_api_key", "The API key is malformed");
        const digest = createHash("sha256").update(token).digest("hex");
        const key = await ctx.call<StoredKey | null, { digest: string }>("keys.findByDigest", { digest });
        if (!key) throw new ApiError("invalid_api_key", "The API key is not valid");
        const org = await ctx.call<{ api_version: string } | null, { org_id: string }>("orgs.lookup", { org_id: key.org_id });
        if (!org) throw new ApiError("invalid_api_key", "The API key's organization no longer exists");
        return {
          key_id: key.id,
          org_id: key.org_id,
          environment: key.environment,
          scopes: key.scopes,
          status: key.status,
          expires_at: key.expires_at,
          api_version: org.api_version,
        };
      },
    },

    /**
     * Internal: makes every live gateway node drop a key or an organization from its cache, and
     * waits for each to confirm, so the next request anywhere sees the change.
     */
    invalidate: {
      visibility: "public",
      params: {
        key_id: { type: "string", optional: true },
        org_id: { type: "string", optional: true },
      },
      async handler(ctx: Context<Invalidation>): Promise<{ confirmed: number; unreachable: string[] }> {
        const nodes = [
          ...new Set(
            this.broker.registry
              .getServiceList({ onlyAvailable: true, skipInternal: true })
              .filter((svc) => svc.name === "gateway" && svc.nodeID !== undefined)
              .map((svc) => svc.nodeID as string),
          ),
        ];
        const results = await Promise.allSettled(
          nodes.map((nodeID) =>
            ctx.call("gateway.invalidate", ctx.params, { nodeID, timeout: INVALIDATE_TIMEOUT_MS }).then(() => nodeID),
          ),
        );
        const unreachable = results.flatMap((r, i) => (r.status === "rejected" ? [nodes[i]] : []));
        if (unreachable.length > 0) this.logger.warn("Gateways did not confirm an invalidation", { unreachable, ...ctx.params });
        return { confirmed: results.length - unreachable.length, unreachable };
      },
    },
  },
};

export default AuthService;
