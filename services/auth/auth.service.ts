import type { Context, ServiceBroker, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { ApiError } from "../../shared/errors";
import { API_KEY_PATTERN, digestOf, IDENTITY_TTL_MS, type Identity, type Invalidation } from "../../shared/api/identity";

/** A gateway that cannot confirm within this time is unreachable; its short cache TTL bounds the risk. */
const INVALIDATE_TIMEOUT_MS = 2000;
/** How long a revocation waits for a resolver the registry does not list to announce itself. */
const LOST_GATEWAY_WAIT_MS = 3000;

interface StoredKey {
  id: string;
  name: string;
  org_id: string;
  environment: Identity["environment"];
  scopes: string[];
  status: Identity["status"];
  expires_at: string | null;
}

interface AuthVars {
  broker: ServiceBroker;
  /**
   * The nodes that resolved a token (here, or on another auth node, which says so) and when this
   * node last heard of it. Only they can hold cached identities, and only for IDENTITY_TTL_MS
   * after. The registry alone misses some of them: a gateway serves for about a second before
   * Moleculer announces it (once all its services have started), and missed heartbeats drop a
   * gateway that may still be serving.
   */
  resolvers: Map<string, number>;
  /** The auth nodes last seen in the registry: one that joins is told of the recent resolvers. */
  authNodes: Set<string>;
}
interface AuthMethods {
  /** The nodes the registry lists as running `service` (each once). */
  nodesOf(service: string): string[];
  /** Tells every auth node (this one too) of resolvers, each with how long ago it was heard from. */
  shareResolvers(seen: { node_id: string; ago_ms: number }[]): void;
  /** Records that `nodeID` resolved a token; tells the other auth nodes when it is news. */
  noteResolver(nodeID: string): void;
  /** Asks a node the registry does not list to announce itself, and waits (at most `ms`) until it is listed. */
  findAgain(nodeID: string, ms: number): Promise<boolean>;
}

/** Broadcast to the auth nodes when one of them hears from a resolver it had not heard of lately, or sees a new auth node. */
const RESOLVER_SEEN = "auth.resolver-seen";

/**
 * Authentication: turns a bearer token into an identity, and makes sure every gateway node forgets
 * a key (or an organization's settings) before a revocation is answered: those the registry lists,
 * and every node that resolved a token in the last IDENTITY_TTL_MS (whose cache may hold the key)
 * though the registry does not list it yet, or any more.
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
        if (ctx.nodeID) this.noteResolver(ctx.nodeID);
        if (!API_KEY_PATTERN.test(token)) throw new ApiError("invalid_api_key", "The API key is malformed");
        const digest = digestOf(token);
        const key = await ctx.call<StoredKey | null, { digest: string }>("keys.findByDigest", { digest });
        if (!key) throw new ApiError("invalid_api_key", "The API key is not valid");
        const org = await ctx.call<{ api_version: string } | null, { org_id: string }>("orgs.lookup", { org_id: key.org_id });
        if (!org) throw new ApiError("invalid_api_key", "The API key's organization no longer exists");
        return {
          key_id: key.id,
          key_name: key.name,
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
        const live = this.nodesOf("gateway");
        const now = Date.now();
        for (const [id, at] of this.resolvers) if (now - at >= IDENTITY_TTL_MS) this.resolvers.delete(id);
        // Resolvers the registry does not list (not announced yet, or lost): found again, then told.
        const lost = [...this.resolvers.keys()].filter((id) => !live.includes(id));
        const confirm = (nodeID: string): Promise<boolean> =>
          ctx.call("gateway.invalidate", ctx.params, { nodeID, timeout: INVALIDATE_TIMEOUT_MS }).then(
            () => true,
            () => false,
          );
        const nodes = [...live, ...lost];
        const confirmed = await Promise.all([
          ...live.map(confirm),
          ...lost.map(async (nodeID) => (await this.findAgain(nodeID, LOST_GATEWAY_WAIT_MS)) && confirm(nodeID)),
        ]);
        const unreachable = nodes.filter((_, i) => !confirmed[i]);
        if (unreachable.length > 0) this.logger.warn("Gateways did not confirm an invalidation", { unreachable, ...ctx.params });
        else this.logger.info("Invalidation confirmed by every gateway", { gateways: nodes, ...ctx.params });
        return { confirmed: nodes.length - unreachable.length, unreachable };
      },
    },
  },

  events: {
    [RESOLVER_SEEN]: {
      handler(ctx: Context<{ seen: { node_id: string; ago_ms: number }[] }>) {
        // Ages, not times: each auth node keeps its own clock.
        const now = Date.now();
        for (const { node_id, ago_ms } of ctx.params.seen)
          this.resolvers.set(node_id, Math.max(now - ago_ms, this.resolvers.get(node_id) ?? 0));
      },
    },
    "$services.changed"() {
      const listed = this.nodesOf("auth");
      const joined = listed.some((id) => !this.authNodes.has(id));
      this.authNodes = new Set(listed);
      const at = Date.now();
      const seen = [...this.resolvers].filter(([, t]) => at - t < IDENTITY_TTL_MS).map(([node_id, t]) => ({ node_id, ago_ms: at - t }));
      if (joined && seen.length > 0) this.shareResolvers(seen);
    },
    "$node.disconnected"(ctx: Context<{ node: { id: string }; unexpected: boolean }>) {
      // A node that said goodbye has stopped, and its cache with it; one that went silent may still serve.
      if (!ctx.params.unexpected) this.resolvers.delete(ctx.params.node.id);
    },
  },

  methods: {
    nodesOf(service) {
      return [
        ...new Set(
          this.broker.registry
            .getServiceList({ onlyAvailable: true, skipInternal: true })
            .filter((svc) => svc.name === service && svc.nodeID !== undefined)
            .map((svc) => svc.nodeID as string),
        ),
      ];
    },

    shareResolvers(seen) {
      this.broker.broadcast(RESOLVER_SEEN, { seen }, { groups: ["auth"] }).catch(() => undefined);
    },

    noteResolver(nodeID) {
      const now = Date.now();
      const last = this.resolvers.get(nodeID);
      this.resolvers.set(nodeID, now);
      if (last === undefined || now - last > IDENTITY_TTL_MS / 2) {
        this.shareResolvers([{ node_id: nodeID, ago_ms: 0 }]);
      }
    },

    async findAgain(nodeID, ms) {
      const transit = this.broker.transit as unknown as { discoverNode(id: string): Promise<void> } | undefined;
      const deadline = Date.now() + ms;
      let asked = 0;
      while (Date.now() < deadline) {
        if (this.nodesOf("gateway").includes(nodeID)) return true;
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
    this.resolvers = new Map();
    this.authNodes = new Set();
  },
};

export default AuthService;
