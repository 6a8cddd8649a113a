import type { Context, ServiceSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { HOOKS_CHANGED, NO_HOOK, type HookReceipt, type HookRefusal, type HooksChanged, type InboundRequest } from "../../shared/api/hooks";
import type { Hook } from "../../shared/api/wire";
import { ApiError, isDuplicate, notFound } from "../../shared/errors";
import { newId, nowIso } from "../../shared/ids";
import { generateSecret, ROTATION_OVERLAP_MS } from "../../shared/net/signing";
import type { PlatformSettings } from "../../shared/runtime/platform";
import { ALL_TENANTS, type Tenant } from "../../shared/storage/types";
import { traceOf } from "../../shared/runtime/trace";
import { HookCache, type HookEntry } from "./hook-cache";
import { holdRequest, statusOf, type PendingRequests } from "./hook-requests.logic";
import type { HookRequestsMethods } from "./hook-requests.mixin";
import {
  dedupeKeyOf,
  hookSecrets,
  hookView,
  passesFilter,
  REFUSAL_MESSAGES,
  requestView,
  secretNameOf,
  verifyRequest,
  type Refusal,
} from "./hooks.logic";
import type { RunsMethods, RunsVars } from "./runs.mixin";
import { newRun } from "./runs.logic";
import { idParams, type IdParams } from "./workflows.params";

/** Counts of a hook's requests are added to its workflow this often (one write per hook that received any). */
const COUNTS_FLUSH_MS = 1_000;
/**
 * The most hooks whose counts wait for a flush, a bound on this memory: past it, requests to other
 * hooks within that second are answered but not counted (docs/inbound-webhooks.md).
 */
const COUNTS_MAX = 10_000;

type Outcome = "accepted" | "filtered" | "duplicates" | "refused";
/** A request's outcome as its record says it. */
const RECORDED = { accepted: "accepted", filtered: "filtered", duplicates: "duplicate", refused: "refused" } as const;
interface PendingCounts extends PendingRequests {
  tenant: Required<Tenant>;
  workflowId: string;
  inc: Partial<Record<Outcome, number>>;
  lastAccepted?: string;
  lastRefused?: { at: string; reason: Refusal };
}
/** What a request's record holds beside its outcome. */
interface RequestDetail {
  requestId?: string;
  runId?: string;
  reason?: Refusal;
}

export interface HooksVars extends RunsVars {
  hookCache: HookCache;
  hookCounts: Map<string, PendingCounts>;
  hookFlusher: NodeJS.Timeout | undefined;
  /** Refusals held for the next flush across this node's hooks (their cap: REFUSALS_KEPT_PER_NODE). */
  hookRefusalsHeld: number;
}
export interface HooksMethods {
  /** Drops hooks from every workflows node's cache (this one at once). */
  hooksChanged(ids: string[]): void;
  /** A hook's workflow, its secrets opened: what verifying needs. */
  loadHook(id: string): Promise<HookEntry | null>;
  /** Counts a request, and keeps its record for the next flush while within the caps (hook-requests.logic.ts). */
  countHook(entry: HookEntry, outcome: Outcome, detail: RequestDetail): void;
  flushHookCounts(): Promise<void>;
}
type Ctx<P> = Context<P, CallMeta>;

/**
 * Inbound webhooks (docs/inbound-webhooks.md): `POST /v1/hooks/{hook_id}`, which the gateway hands
 * over with its body exactly as received, and the rotation of a hook's secret. A request is verified
 * from memory (hook-cache.ts) before anything is read or written: a refusal costs no store access,
 * only a count kept here and added to the hook every second, with the records of its recent requests
 * (hook-requests.logic.ts: the first refusals of each second). An accepted one reads its workflow
 * again, passes the filter and the dedupe key, and starts a run as the API does (the same start
 * budget, the same fair slots). A mixin of the workflows service.
 */
export const HooksMixin: Partial<ServiceSchema<PlatformSettings, HooksMethods & RunsMethods & HookRequestsMethods, HooksVars>> = {
  actions: {
    /** Internal (POST /hooks/{hook_id}, no API key): verify, filter, dedupe, start; a refusal is answered, not thrown. */
    receiveHook: {
      visibility: "public",
      params: {
        hook_id: "string",
        method: "string",
        query: "string",
        headers: { type: "record", key: "string", value: "string" },
        raw: "string",
      },
      async handler(ctx: Ctx<InboundRequest>): Promise<HookReceipt | HookRefusal> {
        const req = ctx.params;
        const requestId = ctx.meta.request_id;
        const entry = await this.hookCache.get(req.hook_id);
        if (!entry) return NO_HOOK;
        const now = Date.now();
        const secrets = entry.trigger.verify.secret === undefined ? hookSecrets(entry.hook, now) : entry.stored ? [entry.stored] : [];
        const refusal = verifyRequest(entry.trigger.verify, secrets, req.headers, req.raw, now);
        if (refusal) {
          this.countHook(entry, "refused", { requestId, reason: refusal });
          return { status: 401, code: "invalid_signature", message: REFUSAL_MESSAGES[refusal] };
        }
        // Verified: from here the workflow is read as it is now (its steps, its status).
        const { tenant } = entry;
        const workflow = await this.workflows.get(tenant, entry.workflowId);
        if (!workflow || workflow.status !== "active" || workflow.trigger.type !== "webhook" || workflow.hook?.id !== req.hook_id) {
          this.hookCache.forget([req.hook_id]);
          return NO_HOOK;
        }
        const trigger = workflow.trigger;
        const request = requestView(req, trigger);
        const passed = passesFilter(trigger, request);
        if (!passed.ok) {
          if (passed.why) this.logger.info(`hook ${req.hook_id} starts no run of workflow ${workflow.id}: ${passed.why}`);
          this.countHook(entry, "filtered", { requestId });
          return { status: 200, run_id: null, duplicate: false, filtered: true };
        }
        const dedupeKey = dedupeKeyOf(trigger, req.headers);
        const triggerKey = dedupeKey === null ? undefined : `${workflow.id}/hook/${dedupeKey}`;
        const first = async () => {
          const run = triggerKey ? await this.runs.findOne(tenant, { trigger_key: triggerKey }) : null;
          if (!run) return null;
          this.countHook(entry, "duplicates", { requestId, runId: run.id });
          return { status: 200 as const, run_id: run.id, duplicate: true, filtered: false };
        };
        const earlier = await first();
        if (earlier) return earlier;
        const input = { request };
        if (Buffer.byteLength(JSON.stringify(input)) > 64 * 1024)
          throw new ApiError("payload_too_large", "The request, as the run's input, is over 64 KiB of JSON");
        const run = {
          ...newRun(
            workflow,
            input,
            { type: "webhook", hook_id: req.hook_id, request_id: ctx.meta.request_id ?? "", dedupe_key: dedupeKey },
            now,
          ),
          ...(triggerKey && { trigger_key: triggerKey }),
          ...traceOf(ctx.meta),
        };
        try {
          // Accepted: over RUN_STARTS_PER_MINUTE, it waits queued for a minute with room.
          const started = await this.startApiRun(tenant, run, true);
          this.countHook(entry, "accepted", { requestId, runId: started.id });
          return { status: 202, run_id: started.id, duplicate: false, filtered: false };
        } catch (err) {
          // The same key at the same time: the run that was stored answers both.
          if (!isDuplicate(err)) throw err;
          const winner = await first();
          if (!winner) throw err;
          return winner;
        }
      },
    },

    /**
     * POST /workflows/{id}/hook/rotate-secret — workflows:write; the old secret is still accepted for
     * 24 h beside the new one (as a webhook's), and a second rotation retires it at once.
     */
    rotateHookSecret: {
      params: idParams,
      async handler(ctx: Ctx<IdParams>): Promise<Hook & { secret: string }> {
        const tenant = tenantOf(ctx);
        const current = await this.workflows.get(tenant, ctx.params.id);
        if (!current) throw notFound("workflow", ctx.params.id);
        if (current.trigger.type !== "webhook" || !current.hook)
          throw new ApiError("invalid_state", "The workflow has no webhook trigger, so no hook", { param: "id" });
        if (!current.hook.secret) {
          const name = secretNameOf(current.trigger.verify);
          throw new ApiError(
            "invalid_state",
            name
              ? `This hook verifies with the stored secret ${name}: replace its value with POST /v1/secrets`
              : "This hook's scheme is none: it has no secret",
            { param: "id" },
          );
        }
        const now = Date.now();
        const secret = generateSecret();
        const updated = await this.workflows.update(
          tenant,
          { id: current.id, "hook.secret": current.hook.secret },
          {
            $set: {
              "hook.secret": secret,
              "hook.previous_secret": { secret: current.hook.secret, expires_at: new Date(now + ROTATION_OVERLAP_MS).toISOString() },
              updated_at: nowIso(),
            },
          },
        );
        if (!updated?.hook || updated.trigger.type !== "webhook")
          throw new ApiError("invalid_state", "The hook changed meanwhile; retry", { param: "id" });
        this.hooksChanged([updated.hook.id]);
        return { ...hookView(updated.hook, updated.trigger.verify, now), secret };
      },
    },
  },

  events: {
    [HOOKS_CHANGED](ctx: Context<HooksChanged>) {
      const { hook_ids, org_id, environment } = ctx.params;
      if (hook_ids) this.hookCache.forget(hook_ids);
      if (org_id) this.hookCache.forgetTenant({ org_id, ...(environment && { environment: environment as Tenant["environment"] }) });
    },
    // Drops sent while this node was cut off are lost: start from the store again.
    "$transporter.connected"() {
      this.hookCache.clear();
    },
  },

  methods: {
    hooksChanged(ids) {
      this.hookCache.forget(ids);
      this.broker.broadcast(HOOKS_CHANGED, { hook_ids: ids } satisfies HooksChanged, { groups: ["workflows"] }).catch(() => undefined);
    },

    async loadHook(id) {
      const workflow = await this.workflows.findOne(ALL_TENANTS, { "hook.id": id });
      if (!workflow?.hook || workflow.status !== "active" || workflow.trigger.type !== "webhook") return null;
      const tenant = { org_id: workflow.org_id, environment: workflow.environment };
      const name = secretNameOf(workflow.trigger.verify);
      let stored: string | null = null;
      if (name !== null) {
        try {
          stored = (await this.secretValues(tenant, [name]))[name] ?? null;
        } catch (err) {
          this.logger.warn(`hook ${id} (workflow ${workflow.id}) cannot verify: ${(err as Error).message}`);
        }
      }
      return { tenant, workflowId: workflow.id, trigger: workflow.trigger, hook: workflow.hook, stored };
    },

    countHook(entry, outcome: Outcome, detail: RequestDetail) {
      const id = entry.hook.id;
      let counts = this.hookCounts.get(id);
      if (!counts) {
        if (this.hookCounts.size >= COUNTS_MAX) return;
        counts = { tenant: entry.tenant, workflowId: entry.workflowId, inc: {}, records: [], refusals: 0 };
        this.hookCounts.set(id, counts);
      }
      counts.inc[outcome] = (counts.inc[outcome] ?? 0) + 1;
      const at = new Date().toISOString();
      if (outcome === "accepted") counts.lastAccepted = at;
      if (outcome === "refused" && detail.reason) counts.lastRefused = { at, reason: detail.reason };
      const recorded = RECORDED[outcome];
      const held = holdRequest(counts, this.hookRefusalsHeld, recorded, () => ({
        id: newId("hkr"),
        ...entry.tenant,
        workflow_id: entry.workflowId,
        hook_id: id,
        outcome: recorded,
        status: statusOf(recorded),
        ...(detail.runId !== undefined && { run_id: detail.runId }),
        ...(detail.reason !== undefined && { reason: detail.reason }),
        ...(detail.requestId && { request_id: detail.requestId }),
        received_at: at,
      }));
      if (held && recorded === "refused") this.hookRefusalsHeld += 1;
    },

    async flushHookCounts() {
      const batch = [...this.hookCounts];
      this.hookCounts.clear();
      this.hookRefusalsHeld = 0;
      await Promise.all(
        batch.map(async ([id, c]) => {
          const $inc = Object.fromEntries(Object.entries(c.inc).map(([k, n]) => [`hook.${k}`, n]));
          const $set: Record<string, unknown> = {};
          if (c.lastAccepted) $set["hook.last_accepted_at"] = c.lastAccepted;
          if (c.lastRefused) {
            $set["hook.last_refused_at"] = c.lastRefused.at;
            $set["hook.last_refused_reason"] = c.lastRefused.reason;
          }
          try {
            const counted = await this.workflows.update(
              c.tenant,
              { id: c.workflowId, "hook.id": id },
              { $inc, ...(Object.keys($set).length > 0 && { $set }) },
            );
            // The workflow was deleted (or its hook changed) meanwhile: its records would be left behind.
            if (!counted) return;
          } catch (err) {
            this.logger.warn(`hook ${id}: its counts were not stored: ${(err as Error).message}`);
          }
          try {
            await this.storeHookRequests(c.tenant, c.workflowId, c.records);
          } catch (err) {
            this.logger.warn(`hook ${id}: its recent requests were not stored: ${(err as Error).message}`);
          }
        }),
      );
    },
  },

  created() {
    this.hookCache = new HookCache((id) => this.loadHook(id));
    this.hookCounts = new Map();
    this.hookRefusalsHeld = 0;
  },

  started() {
    this.hookFlusher = setInterval(() => void this.flushHookCounts(), COUNTS_FLUSH_MS);
    this.hookFlusher.unref();
  },

  async stopped() {
    clearInterval(this.hookFlusher);
    await this.flushHookCounts();
  },
};
