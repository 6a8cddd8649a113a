import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { actorOf, callerOf, tenantOf, type CallMeta } from "../../shared/api/context";
import { notFound } from "../../shared/errors";
import { newId, nowIso } from "../../shared/ids";
import { newestFirst, type ListResult } from "../../shared/api/pagination";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { ALL_TENANTS, collectionSpec } from "../../shared/storage/types";
import { checkCountQuota, QUOTAS } from "../../shared/records/quotas";
import type { Actor, NewApiKey } from "../../shared/api/wire";
import { checkExpiry, checkGrantable, checkRevocable, generateKey, viewOf, type KeyDoc, type KeyView } from "./keys.logic";
import {
  createParams,
  digestParams,
  idParams,
  issueParams,
  listParams,
  touchParams,
  type CreateParams,
  type IdParams,
  type IssueParams,
  type ListParams,
  type TouchParams,
} from "./keys.params";

/** Keys, and the outbox their events wait in until the events service has them. */
const STORE = declareStore({
  owns: {
    keys: collectionSpec<KeyDoc>("api_keys", [
      { fields: { digest: 1 }, unique: true },
      { fields: { org_id: 1, environment: 1, id: -1 } },
      // The active-keys quota counts through it, however many keys were revoked.
      { fields: { org_id: 1, environment: 1, status: 1, id: -1 } },
    ]),
  },
  outbox: true,
});

type KeysVars = StoreVars<typeof STORE>;
interface KeysMethods {
  /** Issues a key; `by`: the key that created it (null: the platform, for a new organization). */
  insertKey(
    input: Omit<KeyDoc, "id" | "digest" | "prefix" | "last4" | "status" | "created_at" | "revoked_at" | "last_used_at">,
    by: Actor | null,
  ): Promise<NewApiKey>;
}

type Ctx<P> = Context<P, CallMeta>;

/** API keys: issued once in clear, stored as a SHA-256 digest, revoked instantly across the cluster. */
const KeysService: ServiceSchema<ServiceSettingSchema, KeysMethods, KeysVars> = {
  name: "keys",
  mixins: [StoreMixin(STORE)],

  actions: {
    /** POST /api-keys — api-keys:write */
    create: {
      params: createParams,
      async handler(ctx: Ctx<CreateParams>) {
        const caller = callerOf(ctx);
        const environment = ctx.params.environment ?? caller.environment;
        const scopes = checkGrantable(caller, ctx.params.scopes, environment);
        const own = await this.keys.get(tenantOf(ctx), caller.key_id);
        const expires_at = checkExpiry(ctx.params.expires_at, Date.now(), own?.expires_at ?? null);
        const limit = QUOTAS.active_api_keys_per_environment;
        await checkCountQuota(
          this.keys,
          { org_id: caller.org_id, environment },
          { status: "active" },
          "active_api_keys_per_environment",
          limit,
          "active API keys per environment",
        );
        return this.insertKey({ org_id: caller.org_id, environment, name: ctx.params.name, scopes, expires_at }, actorOf(ctx));
      },
    },

    /** GET /api-keys — api-keys:read */
    list: {
      params: listParams,
      async handler(ctx: Ctx<ListParams>): Promise<ListResult<KeyView>> {
        const now = Date.now();
        return newestFirst(this.keys, tenantOf(ctx), {}, ctx.params, (doc) => viewOf(doc, now));
      },
    },

    /** GET /api-keys/{id} — api-keys:read */
    get: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<KeyView> {
        const doc = await this.keys.get(tenantOf(ctx), ctx.params.id);
        if (!doc) throw notFound("api key", ctx.params.id);
        return viewOf(doc);
      },
    },

    /**
     * DELETE /api-keys/{id} — api-keys:write. Answers only once every gateway node has dropped the
     * key, so the very next request with it anywhere in the cluster is refused. Revoking a revoked
     * key answers the same revoked key again (DELETE is idempotent).
     */
    revoke: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<KeyView> {
        const tenant = tenantOf(ctx);
        const current = await this.keys.get(tenant, ctx.params.id);
        if (!current) throw notFound("api key", ctx.params.id);
        checkRevocable(callerOf(ctx), current);
        const revoked_at = nowIso();
        const revoked_by = actorOf(ctx);
        // The revocation and its event are stored together or not at all.
        const [revoked] =
          (await this.outbox.recordWith(
            [
              {
                op: "update",
                collection: this.keys,
                scope: tenant,
                filter: { id: current.id, status: "active" },
                update: { $set: { status: "revoked", revoked_at, revoked_by } },
              },
            ],
            {
              org_id: current.org_id,
              environment: current.environment,
              type: "api_key.revoked",
              data: { key_id: current.id, name: current.name, revoked_at, revoked_by },
              source: "keys",
            },
          )) ?? [];
        const doc = (revoked as KeyDoc | undefined) ?? (await this.keys.get(tenant, ctx.params.id)) ?? current;
        await ctx.call("auth.invalidate", { key_id: doc.id });
        return viewOf(doc);
      },
    },

    /** Internal: the platform issues a key without a caller (the bootstrap CLI). */
    issue: {
      visibility: "public",
      params: issueParams,
      async handler(ctx: Context<IssueParams>) {
        const { org_id, environment, name, scopes } = ctx.params;
        return this.insertKey({ org_id, environment, name, scopes: scopes as KeyDoc["scopes"], expires_at: null }, null);
      },
    },

    /** Internal, for the auth service: the stored key with this digest, whatever its organization. */
    findByDigest: {
      visibility: "public",
      params: digestParams,
      async handler(ctx: Context<{ digest: string }>): Promise<KeyDoc | null> {
        return this.keys.findOne(ALL_TENANTS, { digest: ctx.params.digest });
      },
    },

    /** Internal: the gateways report key use in batches; `last_used_at` only moves forward. */
    touch: {
      visibility: "public",
      params: touchParams,
      async handler(ctx: Context<TouchParams>): Promise<number> {
        let updated = 0;
        for (const use of ctx.params.uses) {
          const doc = await this.keys.update(
            { org_id: use.org_id },
            { id: use.key_id, last_used_at: { $ne: use.at } },
            { $set: { last_used_at: use.at } },
          );
          if (doc) updated += 1;
        }
        return updated;
      },
    },
  },

  methods: {
    async insertKey(input, by) {
      const secret = generateKey(input.environment);
      const doc: KeyDoc = {
        id: newId("key"),
        ...input,
        digest: secret.digest,
        prefix: secret.prefix,
        last4: secret.last4,
        status: "active",
        created_at: nowIso(),
        revoked_at: null,
        last_used_at: null,
      };
      // The key and its event are stored together or not at all.
      await this.outbox.recordWith([{ op: "insert", collection: this.keys, doc }], {
        org_id: doc.org_id,
        environment: doc.environment,
        type: "api_key.created",
        data: { key_id: doc.id, name: doc.name, environment: doc.environment, created_by: by },
        source: "keys",
      });
      return { ...viewOf(doc), key: secret.key };
    },
  },
};

export default KeysService;
