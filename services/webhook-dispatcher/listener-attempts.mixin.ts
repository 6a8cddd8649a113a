import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { tenantOf, type CallMeta } from "../../shared/api/context";
import { deliveryId, deliveryView, type Attempt, type DeliveryDoc, type DeliveryView } from "../../shared/records/deliveries";
import { invalidParam, isDuplicate, notFound } from "../../shared/errors";
import type { EventDoc } from "../../shared/records/events";
import type { ListenerSessionDoc } from "../../shared/records/listeners";
import { newestFirst, pageParams, type ListResult, type PageParams } from "../../shared/api/pagination";
import type { Collection, ReadView, Tenant } from "../../shared/storage/types";

/**
 * The delivery log's part for listener sessions (the CLI's `listen --forward-to`): the CLI reports
 * each local answer, stored as a delivery of the session (its `webhook_id` is the session's `ls_…`
 * id) with one attempt. The dispatcher owns `webhook_deliveries`, so the gateway's report route
 * calls these actions. Kept apart from the dispatcher's own sending.
 *
 * A session is stored when its stream opens (`openListenerSession`); a report must name a session of
 * the caller's own organization and environment (404 otherwise), and its delivery's id is the one
 * the stream sent: derived from the event and the session (`deliveryId`), so it sorts by the
 * event's time, is pruned with the log, and never collides with another tenant's.
 */
export const RESPONSE_EXCERPT_MAX = 1024;

const sessionId = {
  type: "string",
  pattern: /^ls_[0-9a-z]{26}$/,
  messages: { stringPattern: "not a listener session id (ls_ and 26 lower-case letters or digits)" },
} as const;

export const listenerAttemptParams = {
  $$strict: true,
  id: sessionId,
  delivery_id: { type: "string", pattern: /^del_[0-9a-z]{26}$/ },
  event_id: { type: "string", min: 1, max: 100 },
  status_code: { type: "number", integer: true, min: 100, max: 599, nullable: true },
  duration_ms: { type: "number", min: 0, max: 3_600_000 },
  error: { type: "string", max: 500, nullable: true, optional: true },
  response_excerpt: { type: "string", max: RESPONSE_EXCERPT_MAX, optional: true },
} as const;
interface ListenerAttemptParams {
  id: string;
  delivery_id: string;
  event_id: string;
  status_code: number | null;
  duration_ms: number;
  error?: string | null;
  response_excerpt?: string;
}

export const listenerDeliveriesParams = { $$strict: true, id: sessionId, ...pageParams } as const;

export const openListenerSessionParams = {
  $$strict: true,
  id: sessionId,
  org_id: { type: "string", min: 1, max: 100 },
  environment: { type: "enum", values: ["live", "test"] },
  key_id: { type: "string", min: 1, max: 100 },
} as const;

/** A listener's attempt also keeps the start of the local answer's body. */
type ListenerAttempt = Attempt & { response_excerpt?: string };

/** The dispatcher's store declaration gives these: its delivery log, and the event log to read. */
interface This {
  deliveries: Collection<DeliveryDoc>;
  listenerSessions: Collection<ListenerSessionDoc>;
  events: ReadView<EventDoc>;
  /** Set here. */
  ownSession(tenant: Tenant, id: string): Promise<ListenerSessionDoc>;
}

const ListenerAttemptsMixinSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, This>> = {
  actions: {
    /** Internal, for the gateway: a listener session's stream opened. */
    openListenerSession: {
      visibility: "public",
      params: openListenerSessionParams,
      async handler(ctx: Context<Omit<ListenerSessionDoc, "created_at">>): Promise<void> {
        const { id, org_id, environment, key_id } = ctx.params;
        await this.listenerSessions.insert({ id, org_id, environment, key_id, created_at: new Date().toISOString() });
      },
    },

    /** POST /listen/{id}/attempts — webhooks:write; the answer the CLI got from the local URL. */
    listenerAttempt: {
      params: listenerAttemptParams,
      async handler(ctx: Context<ListenerAttemptParams, CallMeta>): Promise<DeliveryView> {
        const tenant = tenantOf(ctx);
        const p = ctx.params;
        const session = await this.ownSession(tenant, p.id);
        // Only the tenant's own events: a report cannot name another's.
        const event = await this.events.findOne(tenant, { id: p.event_id });
        if (!event) throw notFound("event", p.event_id);
        const id = deliveryId(event.id, session.id);
        if (p.delivery_id !== id) {
          throw invalidParam("delivery_id", `Not this session's delivery of event ${event.id}: the stream sent it as ${id}`);
        }
        const at = new Date().toISOString();
        const ok = p.status_code !== null && p.status_code >= 200 && p.status_code < 300;
        const attempt: ListenerAttempt = {
          number: 1,
          at,
          status_code: p.status_code,
          duration_ms: Math.round(p.duration_ms),
          error: p.error ?? (ok ? null : `HTTP ${p.status_code}`),
          ...(p.response_excerpt !== undefined && { response_excerpt: p.response_excerpt }),
        };
        const doc: DeliveryDoc = {
          id,
          ...tenant,
          webhook_id: session.id,
          event_id: event.id,
          event_type: event.type,
          status: ok ? "succeeded" : "failed",
          attempts: [attempt],
          series_start: 0,
          next_attempt_at: null,
          created_at: at,
          updated_at: at,
        };
        try {
          await this.deliveries.insert(doc);
          return deliveryView(doc);
        } catch (err) {
          // A report sent again (the CLI retried): the first one stands.
          if (!isDuplicate(err)) throw err;
          const first = await this.deliveries.findOne(tenant, { webhook_id: session.id, event_id: event.id });
          if (!first) throw err;
          return deliveryView(first);
        }
      },
    },

    /** GET /listen/{id}/deliveries — webhooks:read; a listener session's deliveries, newest first. */
    listenerDeliveries: {
      params: listenerDeliveriesParams,
      async handler(ctx: Context<PageParams & { id: string }, CallMeta>): Promise<ListResult<DeliveryView>> {
        const tenant = tenantOf(ctx);
        const session = await this.ownSession(tenant, ctx.params.id);
        return newestFirst(this.deliveries, tenant, { webhook_id: session.id }, ctx.params, deliveryView);
      },
    },
  },

  methods: {
    async ownSession(tenant: Tenant, id: string): Promise<ListenerSessionDoc> {
      const session = await this.listenerSessions.findOne(tenant, { id });
      if (!session) throw notFound("listener session", id);
      return session;
    },
  },
};

/** As a mixin, in a schema whose own vars and methods it cannot name. */
export const ListenerAttemptsMixin = ListenerAttemptsMixinSchema as Partial<ServiceSchema>;
