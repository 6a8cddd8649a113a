/** Workflows: triggers, secrets, definitions, versions, runs and their steps. */
import { RUN_STATUSES } from "../wire";
import { anyObject, environment, idOf, type JsonSchema, nullable, object, objectTag, ref, refOrNull, time } from "./common";
import { EVENT_TYPE, EVENT_TYPE_PATTERN, SUBSCRIBABLE_EVENT_TYPE } from "./events";

/** What starts a run. */
export const TRIGGER_RESOURCES: Record<string, JsonSchema> = {
  ManualTrigger: object("ManualTrigger", { type: { const: "manual" } }),
  EventTrigger: object(
    "EventTrigger",
    {
      type: { const: "event" },
      event_type: {
        anyOf: [SUBSCRIBABLE_EVENT_TYPE, EVENT_TYPE_PATTERN],
      },
      filter: {
        type: "string",
        maxLength: 2004,
        description: "A CEL condition over `event` (braces optional): only events it passes start a run",
      },
    },
    ["filter"],
  ),
  Trigger: {
    oneOf: [ref("ManualTrigger"), ref("EventTrigger"), ref("WebhookTrigger")],
    discriminator: {
      propertyName: "type",
      mapping: {
        manual: "#/components/schemas/ManualTrigger",
        event: "#/components/schemas/EventTrigger",
        webhook: "#/components/schemas/WebhookTrigger",
      },
    },
  },
};

/** Secrets as the API shows them. */
export const SECRET_RESOURCES: Record<string, JsonSchema> = {
  Secret: object(
    "Secret",
    {
      object: objectTag("secret"),
      name: { type: "string", pattern: "^[A-Za-z][A-Za-z0-9_]{0,63}$", examples: ["STRIPE_KEY"] },
      environment,
      key_id: { type: "string", description: "The SECRETS_KEYS key that encrypts it" },
      created_at: time,
      updated_at: time,
    },
    [],
    "A secret as the API shows it: never its value",
  ),
};

/** Workflows, their runs and versions. */
export const WORKFLOW_RESOURCES: Record<string, JsonSchema> = {
  Workflow: object(
    "Workflow",
    {
      object: objectTag("workflow"),
      id: idOf("wf"),
      environment,
      name: { type: "string" },
      description: { type: ["string", "null"] },
      status: { type: "string", enum: ["active", "inactive"] },
      trigger: ref("Trigger"),
      steps: { type: "array", items: ref("Step") },
      timeout_ms: {
        type: ["integer", "null"],
        description: "The most a run may take; a run over it fails with run_timed_out. Null: no limit",
      },
      version: { type: "integer", minimum: 1 },
      created_at: time,
      updated_at: time,
      hook: { ...ref("Hook"), description: "A webhook trigger's hook (docs/inbound-webhooks.md)" },
      hook_secret: {
        type: ["string", "null"],
        description: "The hook's secret, when this write made it (POST, or a PATCH to a webhook trigger): in this answer only",
      },
    },
    ["timeout_ms", "hook", "hook_secret"],
  ),
  RunStep: object(
    "RunStep",
    {
      id: { type: "string" },
      type: { type: "string", enum: ["http", "delay", "approval", "emit", "stop", "set"] },
      status: { type: "string", enum: ["pending", "running", "waiting", "succeeded", "failed", "cancelled", "skipped"] },
      output: {},
      error: { type: ["string", "null"] },
      attempt_count: { type: "integer", minimum: 0, description: "How many times the step was tried" },
      started_at: nullable(time),
      finished_at: nullable(time),
      message: { type: ["string", "null"], description: "Approval steps, once reached: the message with its templates filled" },
      decision: { ...refOrNull("ApprovalDecision"), description: "Approval steps, once decided" },
      timeout_at: { ...nullable(time), description: "Approval steps with a timeout_ms, while they wait: when they time out" },
      attempts: {
        type: "array",
        maxItems: 10,
        description: "http steps: the newest attempts (at most 10), each with why it failed",
        items: object(
          "StepAttempt",
          {
            attempt: { type: "integer", minimum: 1 },
            started_at: time,
            finished_at: time,
            status_code: { type: "integer" },
            error: { type: ["string", "null"] },
          },
          ["status_code"],
        ),
      },
      error_code: {
        type: ["string", "null"],
        description: "Failed steps: the kind of failure (`step_failed`, `template_error`, `timed_out`, `stopped`, `rejected`)",
      },
    },
    ["message", "decision", "timeout_at", "attempts", "error_code"],
  ),
  ApprovalDecision: object("ApprovalDecision", {
    decision: { type: "string", enum: ["approved", "rejected"] },
    comment: { type: ["string", "null"] },
    decided_by: ref("Actor"),
    decided_at: time,
  }),
  Run: object(
    "Run",
    {
      object: objectTag("run"),
      id: idOf("run"),
      environment,
      workflow_id: idOf("wf"),
      workflow_version: { type: "integer", minimum: 1 },
      status: { type: "string", enum: [...RUN_STATUSES] },
      input: anyObject,
      steps: { type: "array", items: ref("RunStep") },
      trigger: {
        oneOf: [
          object("ManualRunTrigger", { type: { const: "manual" } }),
          object("EventRunTrigger", { type: { const: "event" }, event_id: idOf("evt"), event_type: EVENT_TYPE }),
          ref("WebhookRunTrigger"),
        ],
      },
      attempt: { type: "integer", minimum: 1, description: "1, and one more with every retry of the run" },
      rerun_of: { ...nullable(idOf("run")), description: "The run this one reruns, or null" },
      pending_approval: {
        oneOf: [
          object("PendingApproval", { step_id: { type: "string" }, message: { type: ["string", "null"] }, requested_at: time }),
          { type: "null" },
        ],
        description: "While the run waits for a person: what it asks; null otherwise",
      },
      cancelled_by: { ...refOrNull("Actor"), description: "Who cancelled it through the API" },
      cancel_reason: { type: ["string", "null"], enum: ["requested", "workflow_deleted", null] },
      stop_message: { type: ["string", "null"], description: "The message of the stop step that ended the run, or null" },
      created_at: time,
      updated_at: time,
      finished_at: nullable(time),
    },
    ["cancelled_by", "cancel_reason"],
  ),
  WorkflowDefinition: object("WorkflowDefinition", {
    object: objectTag("workflow_definition"),
    name: { type: "string" },
    description: { type: ["string", "null"] },
    status: { type: "string", enum: ["active", "inactive"] },
    trigger: ref("Trigger"),
    steps: { type: "array", items: ref("Step") },
    timeout_ms: { type: ["integer", "null"] },
  }),
  WorkflowVersion: object(
    "WorkflowVersion",
    {
      object: objectTag("workflow_version"),
      workflow_id: idOf("wf"),
      version: { type: "integer", minimum: 1 },
      name: { type: "string" },
      description: { type: ["string", "null"] },
      status: { type: "string", enum: ["active", "inactive"] },
      trigger: ref("Trigger"),
      steps: { type: "array", items: ref("Step") },
      timeout_ms: { type: ["integer", "null"] },
      created_at: time,
      created_by: { ...refOrNull("Actor"), description: "The key whose write made this version (null: not known)" },
    },
    ["timeout_ms"],
  ),
};
