import type { ServiceSchema } from "moleculer";
import type { ServiceName } from "../shared/config";
import AnalyticsService from "./analytics/analytics.service";
import AuthService from "./auth/auth.service";
import EventsService from "./events/events.service";
import GatewayService from "./gateway/gateway.service";
import KeysService from "./keys/keys.service";
import OrgsService from "./orgs/orgs.service";
import DispatcherService from "./webhook-dispatcher/dispatcher.service";
import WebhooksService from "./webhooks/webhooks.service";
import WorkflowsService from "./workflows/workflows.service";

/**
 * The schemas a node can run, by the names SERVICES uses. Services never import one another; only
 * this list (and the entry points) knows them all. Names not here yet are built in later issues.
 */
export const SERVICE_SCHEMAS: Partial<Record<ServiceName, ServiceSchema<any, any, any>>> = {
  gateway: GatewayService,
  auth: AuthService,
  keys: KeysService,
  orgs: OrgsService,
  events: EventsService,
  webhooks: WebhooksService,
  "webhook-dispatcher": DispatcherService,
  workflows: WorkflowsService,
  analytics: AnalyticsService,
};
