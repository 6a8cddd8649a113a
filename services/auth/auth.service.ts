import type { Context, ServiceBroker, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { createHash } from "node:crypto";
import { ApiError } from "../../shared/errors";
import { IDENTITY_TTL_MS, type Identity, type Invalidation } from "../../shared/identity";

const KEY_SHAPE = /^svc_(live|test)_[0-9A-Za-z]{32}$/;
/** A gateway that cannot confirm within this time is unreachable; its short cache TTL bounds the risk. */
const INVALIDATE_TIMEOUT_MS = 2000;
/** How long a revocation waits for a gateway this node lost sight of to be found again. */
const LOST_GATEWAY_WAIT_MS = 3000;

interface StoredKey {
  id: string;
  org_id: string;
  environment: Identity["environment"];
  scopes: string[];
  status: Identity["status"];
  expires_at: string | null;
}

interface AuthVars {
  broker: ServiceBroker;
  /**
   * Gateway nodes this node has seen: 0 while in the registry, else when they left it unexpectedly
   * (missed heartbeats). Such a gateway may still be up and serving from its cache.
   */
  gateways: Map<string, number>;
}
interface AuthMethods {
  liveGateways(): string[];
  noteGateways(): void;
  /** Asks a lost node to announce itself again, and waits (at most `ms`) until it is back. */
  findAgain(nodeID: string, ms: number): Promise<boolean>;
}

/**
 * Authentication: turns a bearer token into an identity, and makes sure every gateway node forgets
 * a key (or an organization's settings) before a revocation is answered, including a gateway that
 * this node's registry lost in the last IDENTITY_TTL_MS (whose cache may still hold the key).
 */
const AuthService: ServiceSchema<ServiceSettingSchema, AuthMethods, AuthVars> = {
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
        const live = this.liveGateways();
        for (const id of live) this.gateways.set(id, 0);
        const now = Date.now();
        const lost = [...this.gateways].filter(([id, at]) => at > 0 && now - at < IDENTITY_TTL_MS && !live.includes(id)).map(([id]) => id);
        const confirm = (nodeID: string): Promise<boolean> =>
          ctx.call("gateway.invalidate", ctx.params, { nodeID, timeout: INVALIDATE_TIMEOUT_MS }).then(
            () => true,
            () => false,
          );
        const nodes = [...live, ...lost];
        const confirmed = await Promise.all([...live.map(confirm), ...lost.map(async (nodeID) => (await this.findAgain(nodeID, LOST_GATEWAY_WAIT_MS)) && confirm(nodeID))]);
        const unreachable = nodes.filter((_, i) => !confirmed[i]);
        if (unreachable.length > 0) this.logger.warn("Gateways did not confirm an invalidation", { unreachable, ...ctx.params });
        else this.logger.info("Invalidation confirmed by every gateway", { gateways: nodes, ...ctx.params });
        return { confirmed: nodes.length - unreachable.length, unreachable };
      },
    },
  },

  events: {
    "$services.changed"() {
      this.noteGateways();
    },
    "$node.disconnected"(ctx: Context<{ node: { id: string }; unexpected: boolean }>) {
      const { node, unexpected } = ctx.params;
      if (!this.gateways.has(node.id)) return;
      // A gateway that said goodbye has stopped, and its cache with it.
      if (unexpected) this.gateways.set(node.id, Date.now());
      else this.gateways.delete(node.id);
    },
  },

  methods: {
    liveGateways() {
      return [
        ...new Set(
          this.broker.registry
            .getServiceList({ onlyAvailable: true, skipInternal: true })
            .filter((svc) => svc.name === "gateway" && svc.nodeID !== undefined)
            .map((svc) => svc.nodeID as string),
        ),
      ];
    },

    noteGateways() {
      for (const id of this.liveGateways()) this.gateways.set(id, 0);
    },

    async findAgain(nodeID, ms) {
      const transit = this.broker.transit as unknown as { discoverNode(id: string): Promise<void> } | undefined;
      const deadline = Date.now() + ms;
      let asked = 0;
      while (Date.now() < deadline) {
        if (this.liveGateways().includes(nodeID)) return true;
        // DISCOVER straight to the node: a live one answers with its INFO within milliseconds.
        if (Date.now() - asked > 500) {
          asked = Date.now();
          await transit?.discoverNode(nodeID).catch(() => undefined);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      return false;
    },
  },

  created() {
    this.gateways = new Map();
  },
};

export default AuthService;
