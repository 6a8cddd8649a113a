import type { ScopeName } from "../../shared/api/scopes";

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE";

/** One public endpoint: the whole `/v1` surface, with the scope each needs, reads on one screen. */
export interface RouteDef {
  method: HttpMethod;
  /** Path template under /v1 as the docs write it, e.g. `/api-keys/{id}`. */
  path: string;
  action: string;
  /** `null`: any valid key may call it (`GET /me`, which tells a key who it is). */
  scope: ScopeName | null;
  /** 201 for creations, 202 for work started in the background; 200 otherwise. */
  status?: 201 | 202;
  /** The action answers a `ListResult` that becomes `{data, meta}`. */
  list?: true;
  /** The fields of the answer that hold a secret shown once: never stored for an idempotent replay. */
  secret?: SecretField | readonly SecretField[];
  /**
   * An inbound webhook: no API key (the hook's signature is checked instead); the gateway hands the
   * raw request to the action (inbound.mixin.ts). Its `scope` is null.
   */
  inbound?: true;
  /** The gateway answers with a stream of Server-Sent Events (services/gateway/listen.mixin.ts). */
  stream?: true;
  /** What `data` holds (one, or a list's items): a schema of shared/api/schemas.ts RESOURCES, for the API reference. */
  resource?: string;
  /**
   * Every mutation (a route that is not a GET) says how its success is recorded in the audit log
   * (`GET /audit-log`), or `false` with the reason it is not (test/unit/services/gateway/routes.test.ts).
   */
  audit?: AuditSpec | false;
}

export type SecretField = "key" | "secret" | "signing_secret" | "hook_secret";

export interface AuditSpec {
  /** `<resource type>.<verb>`: the entry's action, and its resource's type (the part before the dot). */
  action: string;
  /** The field of the answer holding the resource's id; default: the path's last parameter, else the answer's `id`. */
  id?: string;
}

const audit = (action: string, id?: string): AuditSpec => ({ action, ...(id && { id }) });

export const ROUTES: readonly RouteDef[] = [
  { method: "GET", path: "/me", action: "orgs.me", scope: null, resource: "Identity" },

  { method: "GET", path: "/orgs/{id}", action: "orgs.get", scope: "org:admin", resource: "Organization" },
  { method: "PATCH", path: "/orgs/{id}", action: "orgs.update", scope: "org:admin", resource: "Organization", audit: audit("org.updated") },
  { method: "GET", path: "/orgs/{id}/environments", action: "orgs.environments", scope: "org:admin", resource: "Environment", list: true },
  { method: "GET", path: "/orgs/{id}/members", action: "orgs.listMembers", scope: "org:admin", resource: "Member", list: true },
  {
    method: "POST",
    path: "/orgs/{id}/members",
    action: "orgs.addMember",
    scope: "org:admin",
    resource: "Member",
    status: 201,
    audit: audit("member.added", "id"),
  },
  {
    method: "PATCH",
    path: "/orgs/{id}/members/{member_id}",
    action: "orgs.updateMember",
    scope: "org:admin",
    resource: "Member",
    audit: audit("member.role_changed"),
  },
  {
    method: "DELETE",
    path: "/orgs/{id}/members/{member_id}",
    action: "orgs.removeMember",
    scope: "org:admin",
    resource: "Member",
    audit: audit("member.removed"),
  },

  {
    method: "POST",
    path: "/api-keys",
    action: "keys.create",
    scope: "api-keys:write",
    resource: "NewApiKey",
    status: 201,
    secret: "key",
    audit: audit("api_key.created"),
  },
  { method: "GET", path: "/api-keys", action: "keys.list", scope: "api-keys:read", resource: "ApiKey", list: true },
  { method: "GET", path: "/api-keys/{id}", action: "keys.get", scope: "api-keys:read", resource: "ApiKey" },
  {
    method: "DELETE",
    path: "/api-keys/{id}",
    action: "keys.revoke",
    scope: "api-keys:write",
    resource: "ApiKey",
    audit: audit("api_key.revoked"),
  },

  // The data plane (thousands a second) is not in the audit log: GET /analytics/usage counts it by key and route.
  { method: "POST", path: "/events", action: "events.emit", scope: "events:write", resource: "Event", status: 201, audit: false },
  { method: "GET", path: "/events", action: "events.list", scope: "events:read", resource: "Event", list: true },
  // Before `/events/{id}`: routes match in this order.
  { method: "GET", path: "/events/types", action: "events.types", scope: "events:read", resource: "EventType", list: true },
  { method: "GET", path: "/events/{id}", action: "events.get", scope: "events:read", resource: "Event" },
  // The delivery log's view of one event: webhooks:read, as every view of the log.
  {
    method: "GET",
    path: "/events/{id}/deliveries",
    action: "webhooks.eventDeliveries",
    scope: "webhooks:read",
    resource: "Delivery",
    list: true,
  },

  {
    method: "POST",
    path: "/workflows",
    action: "workflows.create",
    scope: "workflows:write",
    resource: "WorkflowWithSecret",
    status: 201,
    secret: ["signing_secret", "hook_secret"],
    audit: audit("workflow.created"),
  },
  // Checks a definition and stores nothing: nothing changed to record.
  {
    method: "POST",
    path: "/workflows/validate",
    action: "workflows.validate",
    scope: "workflows:read",
    resource: "WorkflowDefinition",
    audit: false,
  },
  { method: "GET", path: "/workflows", action: "workflows.list", scope: "workflows:read", resource: "Workflow", list: true },
  { method: "GET", path: "/workflows/{id}", action: "workflows.get", scope: "workflows:read", resource: "Workflow" },
  {
    method: "PATCH",
    path: "/workflows/{id}",
    action: "workflows.update",
    scope: "workflows:write",
    resource: "Workflow",
    audit: audit("workflow.updated"),
  },
  {
    method: "DELETE",
    path: "/workflows/{id}",
    action: "workflows.remove",
    scope: "workflows:write",
    resource: "Workflow",
    audit: audit("workflow.deleted"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/rotate-secret",
    action: "workflows.rotateSecret",
    scope: "workflows:write",
    resource: "WorkflowWithSecret",
    secret: "signing_secret",
    audit: audit("workflow.secret_rotated"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/hook/rotate-secret",
    action: "workflows.rotateHookSecret",
    scope: "workflows:write",
    resource: "HookWithSecret",
    secret: "secret",
    audit: audit("workflow.hook_secret_rotated"),
  },
  {
    method: "GET",
    path: "/workflows/{id}/hook/requests",
    action: "workflows.listHookRequests",
    scope: "workflows:read",
    resource: "HookRequest",
    list: true,
  },
  // Inbound webhooks (docs/inbound-webhooks.md): the data plane, without a key; the run is the record.
  {
    method: "POST",
    path: "/hooks/{hook_id}",
    action: "workflows.receiveHook",
    scope: null,
    inbound: true,
    resource: "HookReceipt",
    status: 202,
    audit: false,
  },
  // The data plane, as POST /events (counted by key in GET /analytics/usage); the run itself is the record.
  {
    method: "POST",
    path: "/workflows/{id}/runs",
    action: "workflows.startRun",
    scope: "workflows:write",
    resource: "Run",
    status: 201,
    audit: false,
  },
  { method: "GET", path: "/workflows/{id}/runs", action: "workflows.listRuns", scope: "workflows:read", resource: "Run", list: true },
  { method: "GET", path: "/workflows/{id}/runs/{run_id}", action: "workflows.getRun", scope: "workflows:read", resource: "Run" },
  {
    method: "POST",
    path: "/workflows/{id}/runs/{run_id}/cancel",
    action: "workflows.cancelRun",
    scope: "workflows:write",
    resource: "Run",
    audit: audit("run.cancelled"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/runs/{run_id}/approve",
    action: "workflows.approveRun",
    scope: "workflows:write",
    resource: "Run",
    audit: audit("run.approved"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/runs/{run_id}/reject",
    action: "workflows.rejectRun",
    scope: "workflows:write",
    resource: "Run",
    audit: audit("run.rejected"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/runs/{run_id}/retry",
    action: "workflows.retryRun",
    scope: "workflows:write",
    resource: "Run",
    audit: audit("run.retried"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/runs/{run_id}/rerun",
    action: "workflows.rerunRun",
    scope: "workflows:write",
    resource: "Run",
    status: 201,
    audit: audit("run.rerun"),
  },
  { method: "GET", path: "/workflows/{id}/schedule", action: "workflows.getSchedule", scope: "workflows:read", resource: "Schedule" },
  {
    method: "POST",
    path: "/workflows/{id}/schedule/trigger",
    action: "workflows.triggerSchedule",
    scope: "workflows:write",
    resource: "Run",
    status: 201,
    audit: audit("workflow.schedule_triggered"),
  },
  {
    method: "POST",
    path: "/workflows/{id}/schedule/backfill",
    action: "workflows.backfillSchedule",
    scope: "workflows:write",
    resource: "ScheduleBackfill",
    audit: audit("workflow.schedule_backfilled"),
  },
  {
    method: "GET",
    path: "/workflows/{id}/versions/{version}",
    action: "workflows.getVersion",
    scope: "workflows:read",
    resource: "WorkflowVersion",
  },
  { method: "GET", path: "/runs", action: "workflows.listAllRuns", scope: "workflows:read", resource: "Run", list: true },
  // Bulk operations on runs: a stored job acting on the runs a filter picks, in the background.
  {
    method: "POST",
    path: "/runs/bulk",
    action: "workflows.startBulk",
    scope: "workflows:write",
    resource: "BulkJob",
    status: 202,
    audit: audit("bulk_job.started", "id"),
  },
  { method: "GET", path: "/runs/bulk", action: "workflows.listBulk", scope: "workflows:read", resource: "BulkJob", list: true },
  { method: "GET", path: "/runs/bulk/{job_id}", action: "workflows.getBulk", scope: "workflows:read", resource: "BulkJob" },
  {
    method: "POST",
    path: "/runs/bulk/{job_id}/cancel",
    action: "workflows.cancelBulk",
    scope: "workflows:write",
    resource: "BulkJob",
    audit: audit("bulk_job.cancelled"),
  },

  // Every organization's successful mutations, both environments (see AuditSpec).
  { method: "GET", path: "/audit-log", action: "orgs.auditLog", scope: "org:admin", resource: "AuditEntry", list: true },

  // The values never leave: a creation answers the metadata only, and only the engine decrypts.
  {
    method: "POST",
    path: "/secrets",
    action: "workflows.createSecret",
    scope: "secrets:write",
    resource: "Secret",
    status: 201,
    audit: audit("secret.stored", "name"),
  },
  { method: "GET", path: "/secrets", action: "workflows.listSecrets", scope: "secrets:read", resource: "Secret", list: true },
  { method: "GET", path: "/secrets/{name}", action: "workflows.getSecret", scope: "secrets:read", resource: "Secret" },
  {
    method: "DELETE",
    path: "/secrets/{name}",
    action: "workflows.removeSecret",
    scope: "secrets:write",
    resource: "Secret",
    audit: audit("secret.deleted"),
  },

  { method: "GET", path: "/analytics/usage", action: "analytics.usage", scope: "analytics:read", resource: "UsageReport" },
  { method: "GET", path: "/analytics/workflows", action: "analytics.workflows", scope: "analytics:read", resource: "OutcomeReport" },
  { method: "GET", path: "/analytics/webhooks", action: "analytics.webhooks", scope: "analytics:read", resource: "OutcomeReport" },

  {
    method: "POST",
    path: "/webhooks",
    action: "webhooks.create",
    scope: "webhooks:write",
    resource: "WebhookWithSecret",
    status: 201,
    secret: "secret",
    audit: audit("webhook.created"),
  },
  { method: "GET", path: "/webhooks", action: "webhooks.list", scope: "webhooks:read", resource: "Webhook", list: true },
  { method: "GET", path: "/webhooks/{id}", action: "webhooks.get", scope: "webhooks:read", resource: "Webhook" },
  {
    method: "PATCH",
    path: "/webhooks/{id}",
    action: "webhooks.update",
    scope: "webhooks:write",
    resource: "Webhook",
    audit: audit("webhook.updated"),
  },
  {
    method: "DELETE",
    path: "/webhooks/{id}",
    action: "webhooks.remove",
    scope: "webhooks:write",
    resource: "Webhook",
    audit: audit("webhook.deleted"),
  },
  {
    method: "POST",
    path: "/webhooks/{id}/rotate-secret",
    action: "webhooks.rotateSecret",
    scope: "webhooks:write",
    resource: "WebhookWithSecret",
    secret: "secret",
    audit: audit("webhook.secret_rotated"),
  },
  {
    method: "GET",
    path: "/webhooks/{id}/deliveries",
    action: "webhooks.deliveries",
    scope: "webhooks:read",
    resource: "Delivery",
    list: true,
  },
  {
    method: "GET",
    path: "/webhooks/{id}/deliveries/{delivery_id}",
    action: "webhooks.delivery",
    scope: "webhooks:read",
    resource: "DeliveryDetail",
  },
  {
    method: "POST",
    path: "/webhooks/{id}/deliveries/{delivery_id}/redeliver",
    action: "webhooks.redeliver",
    scope: "webhooks:write",
    resource: "Delivery",
    audit: audit("delivery.redelivered"),
  },
  {
    method: "POST",
    path: "/webhooks/{id}/deliveries/{delivery_id}/retry",
    action: "webhooks.retry",
    scope: "webhooks:write",
    resource: "Delivery",
    audit: audit("delivery.retried"),
  },
  {
    method: "POST",
    path: "/webhooks/{id}/test",
    action: "webhooks.test",
    scope: "webhooks:write",
    resource: "TestDelivery",
    status: 201,
    audit: audit("webhook.tested"),
  },
  {
    method: "POST",
    path: "/webhooks/{id}/recover",
    action: "webhooks.recover",
    scope: "webhooks:write",
    resource: "Recovery",
    status: 202,
    audit: audit("webhook.recovery_started"),
  },
  { method: "GET", path: "/webhooks/{id}/recover/{job_id}", action: "webhooks.recovery", scope: "webhooks:read", resource: "Recovery" },

  // The CLI's `listen --forward-to`: a stream of signed deliveries, and the local answers it reports.
  { method: "GET", path: "/listen", action: "gateway.listen", scope: "webhooks:write", stream: true },
  {
    method: "POST",
    path: "/listen/{id}/attempts",
    action: "webhook-dispatcher.listenerAttempt",
    scope: "webhooks:write",
    resource: "Delivery",
    status: 201,
    audit: false,
  },
  {
    method: "GET",
    path: "/listen/{id}/deliveries",
    action: "webhook-dispatcher.listenerDeliveries",
    scope: "webhooks:read",
    resource: "Delivery",
    list: true,
  },
];

const compiled = ROUTES.map((route) => ({
  route,
  names: [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]),
  pattern: new RegExp(`^${route.path.replace(/\{\w+\}/g, "([^/]+)")}/?$`),
}));

export type RouteMatch = { route: RouteDef; params: Record<string, string> } | { route: undefined; allowed: HttpMethod[] };

/**
 * The route for a method and a path under /v1. No match at all is a 404; a path that exists for
 * other methods only is a 405 (`allowed` lists them).
 */
export function matchRoute(method: string, path: string): RouteMatch {
  const allowed: HttpMethod[] = [];
  for (const { route, names, pattern } of compiled) {
    const m = pattern.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      if (!allowed.includes(route.method)) allowed.push(route.method);
      continue;
    }
    const params: Record<string, string> = {};
    try {
      names.forEach((name, i) => (params[name] = decodeURIComponent(m[i + 1])));
    } catch {
      return { route: undefined, allowed: [] };
    }
    return { route, params };
  }
  return { route: undefined, allowed };
}

/**
 * A creation's `Location` (`/v1/workflows/wf_…`): the created resource's URL, where a GET route
 * reads it (a listener's attempt has none).
 */
export function locationOf(path: string, body: unknown): string | undefined {
  // A secret is known by its name (GET /secrets/{name}); everything else by its id.
  const data = (body as { data?: { id?: unknown; name?: unknown; object?: unknown } } | null)?.data;
  const id = data?.object === "secret" ? data.name : data?.id;
  if (typeof id !== "string") return undefined;
  const candidate = `${path.replace(/\/$/, "")}/${encodeURIComponent(id)}`;
  return matchRoute("GET", candidate).route === undefined ? undefined : `/v1${candidate}`;
}
