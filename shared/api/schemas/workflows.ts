/** Workflows: triggers, secrets, definitions, versions, runs and their steps. */
import { RUN_STATUSES } from "../wire";
import { cancelOn } from "./steps";
import { anyObject, environment, idOf, type JsonSchema, nullable, object, objectTag, ref, refOrNull, time } from "./common";
import { FLOW_RESOURCES } from "./flow";
import { EVENT_TYPE, EVENT_TYPE_PATTERN, SUBSCRIBABLE_EVENT_TYPE } from "./events";

/** What a schedule trigger takes besides its cron or its period (defaults filled in the answers). */
const SCHEDULE_OPTIONS: Record<string, JsonSchema> = {
  overlap: {
    type: "string",
    enum: ["skip", "allow", "buffer_one"],
    default: "skip",
    description: "A tick while the previous scheduled run has not ended: skipped, started anyway, or one kept until it ends",
  },
  input: { ...anyObject, description: "The input of every scheduled run (at most 64 KiB as JSON)", default: {} },
  catchup_window_ms: {
    type: "integer",
    minimum: 10000,
    maximum: 604800000,
    default: 3600000,
    description: "A tick missed by at most this long is started late; an older one is recorded as missed",
  },
};

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
  CronScheduleTrigger: object(
    "CronScheduleTrigger",
    {
      type: { const: "schedule" },
      cron: {
        type: "string",
        maxLength: 200,
        description: "A cron expression of 5 fields (or 6, seconds first), croner's syntax",
        examples: ["0 8 * * 1-5"],
      },
      timezone: {
        type: "string",
        maxLength: 64,
        description: "The IANA time zone the cron is read in (default UTC)",
        examples: ["Europe/Berlin"],
      },
      ...SCHEDULE_OPTIONS,
    },
    ["timezone", "overlap", "input", "catchup_window_ms"],
    "Runs at every tick of a cron in a time zone",
  ),
  EveryScheduleTrigger: object(
    "EveryScheduleTrigger",
    {
      type: { const: "schedule" },
      every_ms: {
        type: "integer",
        minimum: 1000,
        maximum: 31622400000,
        description: "A tick every this many ms, at whole multiples since the epoch",
      },
      ...SCHEDULE_OPTIONS,
    },
    ["overlap", "input", "catchup_window_ms"],
    "Runs every every_ms",
  ),
  ScheduleTrigger: { oneOf: [ref("CronScheduleTrigger"), ref("EveryScheduleTrigger")] },
  // No discriminator: the two schedule triggers share their `type`, and each kind's `type` is a const.
  Trigger: { oneOf: [ref("ManualTrigger"), ref("EventTrigger"), ref("ScheduleTrigger"), ref("WebhookTrigger")] },
};

const scheduleMiss = object(
  "ScheduleMiss",
  {
    outcome: { type: "string", enum: ["skipped", "missed"] },
    scheduled_at: time,
    last_scheduled_at: { ...time, description: "missed: the last tick of the gap" },
    ticks: { type: "integer", minimum: 1, description: "missed: how many ticks the gap held (counted up to 10,000)" },
    recorded_at: time,
  },
  ["last_scheduled_at", "ticks"],
);

/** A schedule's state, and what a backfill started. */
export const SCHEDULE_RESOURCES: Record<string, JsonSchema> = {
  Schedule: object(
    "Schedule",
    {
      object: objectTag("schedule"),
      workflow_id: idOf("wf"),
      next_run_at: { ...nullable(time), description: "The next tick; null while the workflow is inactive" },
      upcoming: { type: "array", items: time, maxItems: 5, description: "The next ticks" },
      buffered_at: { ...nullable(time), description: "buffer_one: the tick waiting for the previous run to end" },
      last_run_id: nullable(idOf("run")),
      missed_count: { type: "integer", minimum: 0 },
      skipped_count: { type: "integer", minimum: 0 },
      recent: { type: "array", items: scheduleMiss, maxItems: 20, description: "The newest ticks that started no run, newest first" },
    },
    [],
    "When a schedule ticks next, and the ticks that started no run",
  ),
  ScheduleBackfill: object("ScheduleBackfill", {
    object: objectTag("schedule_backfill"),
    workflow_id: idOf("wf"),
    from: time,
    to: time,
    ticks: { type: "integer", minimum: 0, maximum: 100, description: "The ticks in [from, to)" },
    started: {
      type: "array",
      items: object("BackfilledRun", { scheduled_at: time, run_id: idOf("run") }),
      description: "The runs started, one per tick that had none",
    },
    already_started: { type: "array", items: time, description: "The ticks that had a run already" },
  }),
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
      cancel_on: cancelOn,
      output: {
        description: "Templates over the steps, filled when a run succeeds: its runs' output (absent: the last succeeded step's output)",
      },
      concurrency: ref("FlowConcurrency"),
      throttle: ref("FlowThrottle"),
      debounce: ref("FlowDebounce"),
      version: { type: "integer", minimum: 1 },
      created_at: time,
      updated_at: time,
      next_run_at: { ...nullable(time), description: "Schedule triggers: the next tick (null while the workflow is inactive)" },
      hook: { ...ref("Hook"), description: "A webhook trigger's hook (docs/inbound-webhooks.md)" },
      hook_secret: {
        type: ["string", "null"],
        description: "The hook's secret, when this write made it (POST, or a PATCH to a webhook trigger): in this answer only",
      },
    },
    ["timeout_ms", "cancel_on", "next_run_at", "output", "hook", "hook_secret", "concurrency", "throttle", "debounce"],
  ),
  ...FLOW_RESOURCES,
  RunStep: object(
    "RunStep",
    {
      id: { type: "string" },
      type: {
        type: "string",
        enum: ["http", "delay", "approval", "emit", "stop", "set", "wait_for_event", "run_workflow", "map", "parallel"],
      },
      status: { type: "string", enum: ["pending", "running", "waiting", "succeeded", "failed", "cancelled", "skipped"] },
      output: {},
      error: { type: ["string", "null"] },
      attempt_count: { type: "integer", minimum: 0, description: "How many times the step was tried" },
      copied_from: { ...idOf("run"), description: "A rerun from a later step: the run this step's result was copied from" },
      started_at: nullable(time),
      finished_at: nullable(time),
      message: { type: ["string", "null"], description: "Approval steps, once reached: the message with its templates filled" },
      decision: { ...refOrNull("ApprovalDecision"), description: "Approval steps, once decided" },
      waiting_for: {
        oneOf: [object("WaitingFor", { event_type: EVENT_TYPE, match: anyObject }), { type: "null" }],
        description: "wait_for_event steps, once reached: the event they wait for, its match with the templates filled",
      },
      timeout_at: {
        ...nullable(time),
        description: "Approval, wait_for_event and run_workflow steps with a timeout_ms, while they wait: when they time out",
      },
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
        description:
          "Failed steps: the kind of failure (`step_failed`, `template_error`, `timed_out`, `run_timed_out`, `stopped`, `rejected`, `limit_reached`, `child_failed`, `child_cancelled`, `workflow_not_found`)",
      },
    },
    ["message", "decision", "waiting_for", "timeout_at", "attempts", "error_code", "copied_from"],
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
          object("ScheduleRunTrigger", {
            type: { const: "schedule" },
            scheduled_at: time,
            source: { type: "string", enum: ["tick", "trigger", "backfill"] },
          }),
          object("ParentRunTrigger", { type: { const: "parent" } }, [], "A child run: started by its parent's step (`parent`)"),
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
      cancel_reason: { type: ["string", "null"], enum: ["requested", "workflow_deleted", "cancel_on", "parent_ended", null] },
      cancel_event_id: { ...nullable(idOf("evt")), description: "Cancelled by the workflow's cancel_on: the event that matched" },
      queued_reason: {
        type: ["string", "null"],
        enum: ["concurrency", "throttle", "debounce", "start_budget", null],
        description: "While the run waits queued behind its workflow's flow control: which limit holds it; null otherwise",
      },
      flow_key: {
        type: ["string", "null"],
        description: "The flow-control key the run counts under (its workflow's key over its input), or null",
      },
      stop_message: { type: ["string", "null"], description: "The message of the stop step that ended the run, or null" },
      parent: {
        oneOf: [
          object("RunParent", { run_id: idOf("run"), step_id: { type: "string" }, index: { type: "integer", minimum: 0 } }),
          { type: "null" },
        ],
        description: "A child run's parent: the run, the step that started it and its index there; null for other runs",
      },
      output: { description: "Once the run succeeded: its workflow's output filled, else its last succeeded step's output; null before" },
      error: {
        oneOf: [object("RunError", { code: { type: "string" }, message: { type: "string" } }), { type: "null" }],
        description: "Why a run failed that no step failed (its workflow's output could not be filled)",
      },
      timeout_ms: { type: ["integer", "null"], description: "Its workflow's timeout_ms when the run started; null: no limit" },
      deadline_at: {
        ...nullable(time),
        description: "When the run fails with run_timed_out if it has not ended (its start or last retry plus timeout_ms); null: no limit",
      },
      created_at: time,
      updated_at: time,
      finished_at: nullable(time),
    },
    ["cancelled_by", "cancel_reason", "cancel_event_id", "error", "queued_reason", "flow_key"],
  ),
  WorkflowDefinition: object(
    "WorkflowDefinition",
    {
      object: objectTag("workflow_definition"),
      name: { type: "string" },
      description: { type: ["string", "null"] },
      status: { type: "string", enum: ["active", "inactive"] },
      trigger: ref("Trigger"),
      steps: { type: "array", items: ref("Step") },
      timeout_ms: { type: ["integer", "null"] },
      cancel_on: cancelOn,
      output: {},
      concurrency: ref("FlowConcurrency"),
      throttle: ref("FlowThrottle"),
      debounce: ref("FlowDebounce"),
    },
    ["cancel_on", "output", "concurrency", "throttle", "debounce"],
  ),
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
      cancel_on: cancelOn,
      output: {},
      concurrency: ref("FlowConcurrency"),
      throttle: ref("FlowThrottle"),
      debounce: ref("FlowDebounce"),
      created_at: time,
      created_by: { ...refOrNull("Actor"), description: "The key whose write made this version (null: not known)" },
    },
    ["timeout_ms", "cancel_on", "output", "concurrency", "throttle", "debounce"],
  ),
};
