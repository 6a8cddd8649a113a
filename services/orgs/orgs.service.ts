import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { actorOf, callerOf, type CallMeta } from "../../shared/context";
import { ApiError, isDuplicate, notFound } from "../../shared/errors";
import { newId, nowIso } from "../../shared/ids";
import { cursorOf, newestFirst, pageByKey, skipOf, type ListResult } from "../../shared/pagination";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/store-mixin";
import { collectionSpec } from "../../shared/storage/types";
import { LATEST_VERSION } from "../../shared/versions";
import type { ApiKey, EnvironmentInfo, Me } from "../../shared/wire";
import { checkOwnOrg, checkOwnersLeft, ENVIRONMENTS, memberView, orgView, type MemberDoc, type OrgDoc } from "./orgs.logic";
import {
  addMemberParams,
  createParams,
  idParams,
  orgListParams,
  lookupParams,
  memberParams,
  updateMemberParams,
  updateParams,
  type AddMemberParams,
  type CreateParams,
  type IdParams,
  type OrgListParams,
  type MemberParams,
  type UpdateMemberParams,
  type UpdateParams,
} from "./orgs.params";

const STORE = declareStore({
  owns: {
    orgs: collectionSpec<OrgDoc>("orgs"),
    members: collectionSpec<MemberDoc>("members", [{ fields: { org_id: 1, email: 1 }, unique: true }, { fields: { org_id: 1, id: -1 } }]),
  },
});

type OrgsVars = StoreVars<typeof STORE>;
interface OrgsMethods {
  ownOrg(ctx: Context<{ id: string }, CallMeta>): Promise<OrgDoc>;
}
type Ctx<P> = Context<P, CallMeta>;

/** Organizations, their members and their two environments. Every published action needs org:admin. */
const OrgsService: ServiceSchema<ServiceSettingSchema, OrgsMethods, OrgsVars> = {
  name: "orgs",
  mixins: [StoreMixin(STORE)],

  actions: {
    /** Internal (bootstrap CLI): a new organization with one live and one test `org:admin` key. */
    create: {
      visibility: "public",
      params: createParams,
      async handler(ctx: Context<CreateParams>) {
        const at = nowIso();
        const id = newId("org");
        const org: OrgDoc = { id, org_id: id, name: ctx.params.name, api_version: LATEST_VERSION, created_at: at, updated_at: at };
        await this.orgs.insert(org);
        const api_keys = [];
        for (const environment of ["live", "test"] as const) {
          api_keys.push(
            await ctx.call("keys.issue", { org_id: id, environment, name: `Default ${environment} key`, scopes: ["org:admin"] }),
          );
        }
        return { org: orgView(org), api_keys };
      },
    },

    /** Internal, for the auth service: the organization's pinned API version. */
    lookup: {
      visibility: "public",
      params: lookupParams,
      async handler(ctx: Context<{ org_id: string }>) {
        const org = await this.orgs.get({ org_id: ctx.params.org_id }, ctx.params.org_id);
        return org ? { id: org.id, api_version: org.api_version } : null;
      },
    },

    /**
     * GET /me — any valid key: the key's own organization, environment, name and scopes, so a
     * client holding only a key (the dashboard) can tell whose it is and what it may do.
     */
    me: {
      params: { $$strict: true },
      async handler(ctx: Ctx<Record<string, never>>): Promise<Me> {
        const caller = callerOf(ctx);
        const org = await this.orgs.get({ org_id: caller.org_id }, caller.org_id);
        if (!org) throw notFound("organization", caller.org_id);
        const key = await ctx.call<ApiKey, { id: string }>("keys.get", { id: caller.key_id });
        return {
          object: "identity",
          org: { id: org.id, name: org.name },
          environment: caller.environment,
          api_key: { id: key.id, name: key.name, prefix: key.prefix, last4: key.last4, scopes: key.scopes, expires_at: key.expires_at },
        };
      },
    },

    /** GET /orgs/{id} — org:admin */
    get: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>) {
        return orgView(await this.ownOrg(ctx));
      },
    },

    /** PATCH /orgs/{id} — org:admin */
    update: {
      params: updateParams,
      async handler(ctx: Ctx<UpdateParams>) {
        const org = await this.ownOrg(ctx);
        const { name, api_version } = ctx.params;
        const updated = await this.orgs.update(
          { org_id: org.id },
          { id: org.id },
          { $set: { ...(name !== undefined && { name }), ...(api_version !== undefined && { api_version }), updated_at: nowIso() } },
        );
        if (!updated) throw notFound("organization", org.id);
        // Gateways cache the pinned version with each key: drop it so the change applies at once.
        if (api_version !== undefined) await ctx.call("auth.invalidate", { org_id: org.id });
        return orgView(updated);
      },
    },

    /** GET /orgs/{id}/environments — org:admin */
    environments: {
      params: orgListParams,
      async handler(ctx: Ctx<OrgListParams>): Promise<ListResult<EnvironmentInfo>> {
        const org = await this.ownOrg(ctx);
        const all = ENVIRONMENTS.map((env): EnvironmentInfo => ({ object: "environment", org_id: org.id, ...env }));
        const cursor = cursorOf(ctx.params);
        if (cursor !== undefined) return { ...(await pageByKey(all, (env) => env.id, cursor)), total: all.length };
        const start = skipOf(ctx.params);
        return {
          items: all.slice(start, start + ctx.params.per_page),
          total: all.length,
          page: ctx.params.page,
          per_page: ctx.params.per_page,
        };
      },
    },

    /** GET /orgs/{id}/members — org:admin */
    listMembers: {
      params: orgListParams,
      async handler(ctx: Ctx<OrgListParams>) {
        const org = await this.ownOrg(ctx);
        return newestFirst(this.members, { org_id: org.id }, {}, ctx.params, memberView);
      },
    },

    /** POST /orgs/{id}/members — org:admin */
    addMember: {
      params: addMemberParams,
      async handler(ctx: Ctx<AddMemberParams>) {
        const org = await this.ownOrg(ctx);
        const at = nowIso();
        const member: MemberDoc = {
          id: newId("mem"),
          org_id: org.id,
          email: ctx.params.email,
          role: ctx.params.role,
          created_at: at,
          updated_at: at,
        };
        try {
          await this.members.insert(member);
        } catch (err) {
          if (isDuplicate(err)) {
            throw new ApiError("resource_exists", `${member.email} is already a member`, { param: "email" });
          }
          throw err;
        }
        return memberView(member);
      },
    },

    /** PATCH /orgs/{id}/members/{member_id} — org:admin */
    updateMember: {
      params: updateMemberParams,
      async handler(ctx: Ctx<UpdateMemberParams>) {
        const org = await this.ownOrg(ctx);
        const tenant = { org_id: org.id };
        const member = await this.members.get(tenant, ctx.params.member_id);
        if (!member) throw notFound("member", ctx.params.member_id);
        if (member.role === "owner" && ctx.params.role !== "owner") {
          checkOwnersLeft((await this.members.count(tenant, { role: "owner" })) - 1);
        }
        const at = nowIso();
        const updated = await this.members.update(
          tenant,
          { id: member.id, role: member.role },
          {
            $set: { role: ctx.params.role, updated_at: at, role_changed_by: actorOf(ctx), role_changed_at: at },
          },
        );
        if (!updated) throw new ApiError("invalid_state", "The member changed meanwhile; retry", { param: "role" });
        return memberView(updated);
      },
    },

    /** DELETE /orgs/{id}/members/{member_id} — org:admin */
    removeMember: {
      params: memberParams,
      async handler(ctx: Ctx<MemberParams>) {
        const org = await this.ownOrg(ctx);
        const tenant = { org_id: org.id };
        const member = await this.members.get(tenant, ctx.params.member_id);
        if (!member) throw notFound("member", ctx.params.member_id);
        if (member.role === "owner") checkOwnersLeft((await this.members.count(tenant, { role: "owner" })) - 1);
        const removed = await this.members.delete(tenant, { id: member.id });
        if (!removed) throw notFound("member", ctx.params.member_id);
        return memberView(removed);
      },
    },
  },

  methods: {
    async ownOrg(ctx) {
      const caller = callerOf(ctx);
      checkOwnOrg(caller.org_id, ctx.params.id);
      const org = await this.orgs.get({ org_id: caller.org_id }, caller.org_id);
      if (!org) throw notFound("organization", ctx.params.id);
      return org;
    },
  },
};

export default OrgsService;
