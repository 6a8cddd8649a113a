/** Usage and outcome reports. */
import { idOf, type JsonSchema, object, objectTag, ref, time } from "./common";

/** Usage and outcome reports by window. */
export const ANALYTICS_RESOURCES: Record<string, JsonSchema> = {
  UsageReport: object("UsageReport", {
    object: objectTag("usage_report"),
    from: time,
    to: time,
    granularity: { type: "string", enum: ["hour", "day"] },
    group_by: { type: ["string", "null"], enum: ["route", "status", "key", null] },
    buckets: {
      type: "array",
      items: object(
        "UsageBucket",
        {
          start: time,
          route: { type: "string" },
          status: { type: "integer" },
          key_id: { type: "string" },
          count: { type: "integer", minimum: 0 },
          errors: { type: "integer", minimum: 0 },
          p50_ms: { type: ["number", "null"] },
          p95_ms: { type: ["number", "null"] },
        },
        ["route", "status", "key_id"],
      ),
    },
  }),
  Outcomes: {
    type: "object",
    properties: {
      total: { type: "integer", minimum: 0 },
      by_status: { type: "object", additionalProperties: { type: "integer" } },
      success_rate: { type: ["number", "null"] },
      attempt_counts: object("AttemptCounts", {
        total: { type: "integer" },
        succeeded: { type: "integer" },
        failed: { type: "integer" },
      }),
      delivery_success_rate: { type: ["number", "null"] },
    },
    required: ["total", "by_status", "success_rate"],
  },
  OutcomeReport: {
    allOf: [ref("Outcomes")],
    type: "object",
    properties: {
      object: objectTag("outcome_report"),
      from: time,
      to: time,
      workflows: { type: "array", items: { allOf: [ref("Outcomes")], properties: { workflow_id: idOf("wf") }, required: ["workflow_id"] } },
      webhooks: { type: "array", items: { allOf: [ref("Outcomes")], properties: { webhook_id: idOf("wh") }, required: ["webhook_id"] } },
    },
    required: ["object", "from", "to"],
  },
};
