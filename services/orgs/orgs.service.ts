import type { Context, ServiceSchema } from "moleculer";
import type { AuditRecord } from "../../shared/records/audit";
import { actorOf, callerOf, type CallMeta } from "../../shared/api/context";
import { ApiError, isDuplicate, notFound } from "../../shared/errors";
import { idFloorAt, newId, nowIso } from "../../shared/ids";
import { cursorOf, instantOf, newestFirst, pageByKey, skipOf, type ListResult } from "../../shared/api/pagination";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { firstIdAt, prune, pruneAction, Pruner, retentionCutoff, type PruneControl } from "../../shared/records/retention";
import { declareStore, StoreMixin, type StoreVars } from "../../shared/runtime/store.mixin";
import { ALL_TENANTS, collectionSpec, type Filter } from "../../shared/storage/types";
import { LATEST_VERSION } from "../../shared/api/versions";
import type { ApiKey, AuditEntry, EnvironmentInfo, Me } from "../../shared/api/wire";
import {
  auditView,
  checkOneAuditFilter,
  checkOwnOrg,
  checkOwnersLeft,
  ENVIRONMENTS,
  memberView,
  orgView,
  type MemberDoc,
  type OrgDoc,
} from "./orgs.logic";
import {
  addMemberParams,
  auditLogParams,
  createParams,
  idParams,
  orgListParams,
  lookupParams,
  memberParams,
  recordAuditParams,
  updateMemberParams,
  updateParams,
  type AddMemberParams,
  type AuditLogParams,
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
    // Per organization (both environments), newest first, by each filter of GET /audit-log; retention walks `id`.
    auditLog: collectionSpec<AuditRecord>("audit_log", [
      { fields: { org_id: 1, id: -1 } },
      { fields: { org_id: 1, action: 1, id: -1 } },
      { fields: { org_id: 1, "resource.id": 1, id: -1 } },
      { fields: { org_id: 1, "actor.key_id": 1, id: -1 } },
      { fields: { org_id: 1, environment: 1, id: -1 } },
    ]),
  },
  // member.role_changed is stored with the change it records.
  outbox: true,
});

interface OrgsVars extends StoreVars<typeof STORE> {
  pruner: Pruner;
}
interface OrgsMethods {
  ownOrg(ctx: Context<{ id: string }, CallMeta>): Promise<OrgDoc>;
  /** Deletes the audit log entries older than AUDIT_RETENTION_DAYS (as of `now`). */
  pruneAudit(now: number, control: PruneControl): Promise<number>;
}
type Ctx<P> = Context<P, CallMeta>;

/** Organizations, their members, their two environments and their audit log. Every published action needs org:admin. */
const OrgsService: ServiceSchema<PlatformSettings, OrgsMethods, OrgsVars> = {
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
        const by = actorOf(ctx);
        // The change and its event together or neither; the event goes to the environment of the key that made it.
        const [updated] =
          (await this.outbox.recordWith(
            [
              {
                op: "update",
                collection: this.members,
                scope: tenant,
                filter: { id: member.id, role: member.role },
                update: { $set: { role: ctx.params.role, updated_at: at, role_changed_by: by, role_changed_at: at } },
              },
            ],
            {
              org_id: org.id,
              environment: callerOf(ctx).environment,
              type: "member.role_changed",
              data: {
                member_id: member.id,
                email: member.email,
                previous_role: member.role,
                role: ctx.params.role,
                role_changed_by: by,
                role_changed_at: at,
              },
              source: "orgs",
            },
          )) ?? [];
        if (!updated) throw new ApiError("invalid_state", "The member changed meanwhile; retry", { param: "role" });
        return memberView(updated as MemberDoc);
      },
    },

    /**
     * GET /audit-log — org:admin; the organization's entries of both environments, newest first, by
     * one of action, resource id, key or environment, and time (a time range is a range of ids: one index read).
     */
    auditLog: {
      params: auditLogParams,
      handler(ctx: Ctx<AuditLogParams>): Promise<ListResult<AuditEntry>> {
        const { action, resource_id, key_id, environment, created_after, created_before } = ctx.params;
        checkOneAuditFilter(ctx.params);
        const range = {
          ...(created_after !== undefined && { $gte: idFloorAt("aud", instantOf("created_after", created_after)) }),
          ...(created_before !== undefined && { $lt: idFloorAt("aud", instantOf("created_before", created_before)) }),
        };
        const filter: Filter = {
          ...(action && { action }),
          ...(resource_id && { "resource.id": resource_id }),
          ...(key_id && { "actor.key_id": key_id }),
          ...(environment && { environment }),
          ...(Object.keys(range).length > 0 && { id: range }),
        };
        return newestFirst(this.auditLog, { org_id: callerOf(ctx).org_id }, filter, ctx.params, auditView);
      },
    },

    /**
     * Internal (the gateways, by group commit): stores a batch of entries in one write. Idempotent by
     * entry id, so a gateway that retries a write whose answer it missed stores each entry once.
     */
    recordAudit: {
      visibility: "public",
      params: recordAuditParams,
      async handler(ctx: Context<{ entries: AuditRecord[] }>): Promise<number> {
        const { entries } = ctx.params;
        const stored = await this.auditLog.find(ALL_TENANTS, { id: { $in: entries.map((e) => e.id) } });
        const known = new Set(stored.map((e) => e.id));
        const fresh = entries.filter((e) => !known.has(e.id));
        if (fresh.length > 0) await this.store.atomically(fresh.map((doc) => ({ op: "insert" as const, collection: this.auditLog, doc })));
        return fresh.length;
      },
    },

    /** Internal (operators, tests): a retention pass now, or as of `now`. */
    prune: pruneAction,

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
    pruneAudit(now, control) {
      const days = this.settings.config.auditRetentionDays;
      return prune(
        { collection: this.auditLog, field: "id", before: firstIdAt("aud", retentionCutoff(days, now)), removable: {} },
        control,
      );
    },

    async ownOrg(ctx) {
      const caller = callerOf(ctx);
      checkOwnOrg(caller.org_id, ctx.params.id);
      const org = await this.orgs.get({ org_id: caller.org_id }, caller.org_id);
      if (!org) throw notFound("organization", ctx.params.id);
      return org;
    },
  },

  created() {
    this.pruner = new Pruner("audit log entries", (now, control) => this.pruneAudit(now, control), this.logger);
  },

  started() {
    this.pruner.start();
  },

  async stopped() {
    await this.pruner.stop();
  },
};

export default OrgsService;
