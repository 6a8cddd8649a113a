/** Workflow steps: as the API shows them, and as a client writes them (the request-side components). */
import { HTTP_METHODS } from "../wire";
import { anyObject, type JsonSchema, object, ref } from "./common";
import { CUSTOM_EVENT_TYPE, EVENT_TYPE, SUBSCRIBABLE_EVENT_TYPE } from "./events";

/** What every step may say besides its own fields (docs/workflows/language.md). */
const STEP_COMMON: Record<string, JsonSchema> = {
  if: { type: "string", maxLength: 2004, description: "A CEL condition (braces optional): false skips the step (`skipped`, output null)" },
  on_error: {
    type: "string",
    enum: ["fail", "continue"],
    default: "fail",
    description: "`continue`: a failure leaves the step `failed` with its error and the run goes on",
  },
};
const COMMON_KEYS = Object.keys(STEP_COMMON);
const RETRY_POLICY = object(
  "RetryPolicy",
  {
    max_attempts: { type: "integer", minimum: 1, maximum: 20 },
    initial_interval_ms: { type: "integer", minimum: 1, maximum: 3_600_000 },
    backoff_rate: { type: "number", minimum: 1, maximum: 10 },
    max_interval_ms: { type: "integer", minimum: 1, maximum: 3_600_000 },
    jitter: { type: "string", enum: ["full", "none"] },
    on: { type: "array", items: { type: "string", enum: ["timeout", "network", "5xx", "429", "408", "4xx"] } },
  },
  [],
  "When an http step's attempt is tried again; Retry-After is honoured up to max_interval_ms",
);

const httpStep = object(
  "HttpStep",
  {
    id: { type: "string" },
    type: { const: "http" },
    method: { type: "string", enum: [...HTTP_METHODS] },
    url: { type: "string" },
    headers: { type: "object", additionalProperties: { type: "string" } },
    body: {},
    timeout_ms: { type: "integer" },
    retries: { type: "integer" },
    retry: RETRY_POLICY,
    ...STEP_COMMON,
  },
  ["retry", ...COMMON_KEYS],
);

/** A wait's or a cancel_on's match: event paths (`data.…`) and the values they must equal (waits.logic.ts). */
const MATCH: JsonSchema = {
  type: "object",
  maxProperties: 5,
  propertyNames: { pattern: "^data(\\.[A-Za-z0-9_-]+)+$", maxLength: 200 },
  additionalProperties: { type: ["string", "number", "boolean"], maxLength: 256 },
  description:
    "Event paths and the values they must equal: a string (templates allowed, at most 256 characters once filled), a number or a boolean; at most 5",
  examples: [{ "data.order_id": "{{ input.order_id }}" }],
};

/** Steps as the API shows them, discriminated by `type`. */
export const STEP_RESOURCES: Record<string, JsonSchema> = {
  HttpStep: httpStep,
  DelayStep: object(
    "DelayStep",
    { id: { type: "string" }, type: { const: "delay" }, duration_ms: { type: "integer" }, ...STEP_COMMON },
    COMMON_KEYS,
  ),
  ApprovalStep: object(
    "ApprovalStep",
    {
      id: { type: "string" },
      type: { const: "approval" },
      message: { type: ["string", "null"] },
      timeout_ms: { type: "integer" },
      ...STEP_COMMON,
    },
    ["timeout_ms", ...COMMON_KEYS],
  ),
  EmitStep: object(
    "EmitStep",
    { id: { type: "string" }, type: { const: "emit" }, event_type: EVENT_TYPE, data: anyObject, ...STEP_COMMON },
    COMMON_KEYS,
  ),
  StopStep: object(
    "StopStep",
    {
      id: { type: "string" },
      type: { const: "stop" },
      status: { type: "string", enum: ["succeeded", "failed"] },
      message: { type: ["string", "null"] },
      if: STEP_COMMON.if,
    },
    ["if"],
  ),
  SetStep: object("SetStep", { id: { type: "string" }, type: { const: "set" }, output: {}, ...STEP_COMMON }, COMMON_KEYS),
  WaitForEventStep: object(
    "WaitForEventStep",
    {
      id: { type: "string" },
      type: { const: "wait_for_event" },
      event_type: EVENT_TYPE,
      match: MATCH,
      filter: { type: "string" },
      timeout_ms: { type: "integer" },
      ...STEP_COMMON,
    },
    ["filter", ...COMMON_KEYS],
  ),
  CancelOn: object("CancelOn", { event_type: SUBSCRIBABLE_EVENT_TYPE, match: MATCH }, ["match"]),
  RunWorkflowStep: object(
    "RunWorkflowStep",
    {
      id: { type: "string" },
      type: { const: "run_workflow" },
      workflow_id: { type: "string" },
      input: anyObject,
      wait: { type: "boolean" },
      timeout_ms: { type: "integer" },
      ...STEP_COMMON,
    },
    ["timeout_ms", ...COMMON_KEYS],
  ),
  MapStep: object(
    "MapStep",
    {
      id: { type: "string" },
      type: { const: "map" },
      items: { oneOf: [{ type: "string" }, { type: "array", items: {} }] },
      max_concurrency: { type: "integer" },
      tolerated_failures: { type: "integer" },
      steps: { type: "array", items: ref("Step") },
      workflow_id: { type: "string" },
      ...STEP_COMMON,
    },
    ["steps", "workflow_id", ...COMMON_KEYS],
  ),
  ParallelStep: object(
    "ParallelStep",
    {
      id: { type: "string" },
      type: { const: "parallel" },
      branches: { type: "object", additionalProperties: { type: "array", items: ref("Step") } },
      ...STEP_COMMON,
    },
    COMMON_KEYS,
  ),
  Step: {
    oneOf: [
      ref("HttpStep"),
      ref("DelayStep"),
      ref("ApprovalStep"),
      ref("EmitStep"),
      ref("StopStep"),
      ref("SetStep"),
      ref("WaitForEventStep"),
      ref("RunWorkflowStep"),
      ref("MapStep"),
      ref("ParallelStep"),
    ],
    discriminator: {
      propertyName: "type",
      mapping: {
        http: "#/components/schemas/HttpStep",
        delay: "#/components/schemas/DelayStep",
        approval: "#/components/schemas/ApprovalStep",
        emit: "#/components/schemas/EmitStep",
        stop: "#/components/schemas/StopStep",
        set: "#/components/schemas/SetStep",
        wait_for_event: "#/components/schemas/WaitForEventStep",
        run_workflow: "#/components/schemas/RunWorkflowStep",
        map: "#/components/schemas/MapStep",
        parallel: "#/components/schemas/ParallelStep",
      },
    },
  },
};

const STEP_ID = { type: "string", pattern: "^[a-z][a-z0-9_]{0,49}$", description: "Defaults to step_<n> (its position from 1)" };
const TEMPLATES =
  "Strings may hold templates: `{{ <CEL expression> }}` over `input`, `steps.<earlier step id>` (`output`, `status`, `error`), `run` and `workflow`, checked when written (docs/workflows/language.md); `{{secrets.NAME}}` in http steps only.";

/** What a client writes as a step: the rules checkSteps (services/workflows/workflows.logic.ts) enforces. */
const stepInputs: Record<string, JsonSchema> = {
  HttpStepInput: object(
    "HttpStepInput",
    {
      id: STEP_ID,
      type: { const: "http" },
      method: { type: "string", enum: [...HTTP_METHODS], default: "POST" },
      url: {
        type: "string",
        minLength: 1,
        maxLength: 2048,
        description: `An absolute https URL to a public address (http in the test environment), or one with templates, checked when the run resolves it. ${TEMPLATES}`,
        examples: ["https://example.com/hooks/orders"],
      },
      headers: {
        type: "object",
        maxProperties: 50,
        propertyNames: { pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" },
        additionalProperties: { type: "string" },
        default: {},
      },
      body: { description: `Any JSON value, at most 64 KiB as JSON. ${TEMPLATES}` },
      timeout_ms: { type: "integer", minimum: 1, maximum: 60_000, default: 10_000 },
      retries: { type: "integer", minimum: 0, maximum: 10, default: 0 },
      retry: RETRY_POLICY,
      ...STEP_COMMON,
    },
    ["id", "method", "headers", "body", "timeout_ms", "retries", "retry", ...COMMON_KEYS],
  ),
  DelayStepInput: object(
    "DelayStepInput",
    {
      id: STEP_ID,
      type: { const: "delay" },
      duration_ms: { type: "integer", minimum: 1, maximum: 30 * 24 * 60 * 60 * 1000 },
      ...STEP_COMMON,
    },
    ["id", ...COMMON_KEYS],
  ),
  ApprovalStepInput: object(
    "ApprovalStepInput",
    {
      id: STEP_ID,
      type: { const: "approval" },
      message: { type: ["string", "null"], maxLength: 1000 },
      timeout_ms: {
        type: "integer",
        minimum: 1,
        maximum: 30 * 24 * 60 * 60 * 1000,
        description: "No decision within this: the step fails with timed_out",
      },
      ...STEP_COMMON,
    },
    ["id", "message", "timeout_ms", ...COMMON_KEYS],
  ),
  EmitStepInput: object(
    "EmitStepInput",
    { id: STEP_ID, type: { const: "emit" }, event_type: CUSTOM_EVENT_TYPE, data: { ...anyObject, default: {} }, ...STEP_COMMON },
    ["id", "data", ...COMMON_KEYS],
  ),
  StopStepInput: object(
    "StopStepInput",
    {
      id: STEP_ID,
      type: { const: "stop" },
      status: { type: "string", enum: ["succeeded", "failed"] },
      message: { type: ["string", "null"], maxLength: 1000, description: `Kept as the run's stop_message. ${TEMPLATES}` },
      if: STEP_COMMON.if,
    },
    ["id", "message", "if"],
  ),
  SetStepInput: object(
    "SetStepInput",
    {
      id: STEP_ID,
      type: { const: "set" },
      output: { description: `Any JSON value, at most 64 KiB as JSON: the step's output, its templates filled. ${TEMPLATES}` },
      ...STEP_COMMON,
    },
    ["id", ...COMMON_KEYS],
  ),
  WaitForEventStepInput: object(
    "WaitForEventStepInput",
    {
      id: STEP_ID,
      type: { const: "wait_for_event" },
      event_type: SUBSCRIBABLE_EVENT_TYPE,
      match: { ...MATCH, default: {} },
      filter: {
        type: "string",
        maxLength: 2004,
        description: "A CEL condition over `event` (braces optional): only events it passes count",
      },
      timeout_ms: {
        type: "integer",
        minimum: 1,
        maximum: 30 * 24 * 60 * 60 * 1000,
        default: 30 * 24 * 60 * 60 * 1000,
        description: "No matching event within this: the step fails with timed_out",
      },
      ...STEP_COMMON,
    },
    ["id", "match", "filter", "timeout_ms", ...COMMON_KEYS],
  ),
  RunWorkflowStepInput: object(
    "RunWorkflowStepInput",
    {
      id: STEP_ID,
      type: { const: "run_workflow" },
      workflow_id: {
        type: "string",
        minLength: 1,
        maxLength: 2000,
        description: `A workflow of the same environment (\`wf_…\`, checked when written), or a template giving one (checked when the run gets there). ${TEMPLATES}`,
      },
      input: { ...anyObject, default: {}, description: `The child run's input, at most 64 KiB as JSON. ${TEMPLATES}` },
      wait: {
        type: "boolean",
        default: true,
        description:
          "true: the step waits for the child and its output is `{run_id, status, output}`; false: it succeeds at once with `{run_id}`",
      },
      timeout_ms: {
        type: "integer",
        minimum: 1,
        maximum: 30 * 24 * 60 * 60 * 1000,
        description: "Needs wait: true. A child not ended within this is cancelled, and the step fails with timed_out",
      },
      ...STEP_COMMON,
    },
    ["id", "input", "wait", "timeout_ms", ...COMMON_KEYS],
    "Runs a saved workflow as a child run (docs/workflows/README.md#run_workflow)",
  ),
  MapStepInput: object(
    "MapStepInput",
    {
      id: STEP_ID,
      type: { const: "map" },
      items: {
        oneOf: [
          { type: "string", maxLength: 2000 },
          { type: "array", maxItems: 1000, items: {} },
        ],
        description: `A template that gives a list of at most 1,000 items (such as "{{ input.orders }}"), or a list. ${TEMPLATES}`,
      },
      max_concurrency: { type: "integer", minimum: 1, maximum: 100, default: 10, description: "Children unfinished at once" },
      tolerated_failures: {
        type: "integer",
        minimum: 0,
        maximum: 1000,
        default: 0,
        description: "Failed children the step tolerates; one more fails it and cancels the unfinished ones",
      },
      steps: {
        type: "array",
        minItems: 1,
        maxItems: 50,
        items: ref("StepInput"),
        description: "The steps each child runs, its input being `{item, index}`; or else workflow_id",
      },
      workflow_id: {
        type: "string",
        minLength: 1,
        maxLength: 2000,
        description: `A workflow run for each item with the input \`{item, index}\`; or else steps. ${TEMPLATES}`,
      },
      ...STEP_COMMON,
    },
    ["id", "max_concurrency", "tolerated_failures", "steps", "workflow_id", ...COMMON_KEYS],
    "Runs steps once per item, each as a child run (docs/workflows/README.md#map)",
  ),
  ParallelStepInput: object(
    "ParallelStepInput",
    {
      id: STEP_ID,
      type: { const: "parallel" },
      branches: {
        type: "object",
        minProperties: 1,
        maxProperties: 10,
        additionalProperties: { type: "array", minItems: 1, maxItems: 50, items: ref("StepInput") },
        description: "1 to 10 branches by name (a-z, 0-9, _), each a list of steps run as a child run with the run's input",
      },
      ...STEP_COMMON,
    },
    ["id", ...COMMON_KEYS],
    "Runs each branch as a child run, all at once (docs/workflows/README.md#parallel)",
  ),
};

/** Request-side components: the step inputs, discriminated by `type`. */
export const REQUEST_COMPONENTS: Record<string, JsonSchema> = {
  ...stepInputs,
  StepInput: {
    oneOf: Object.keys(stepInputs).map(ref),
    discriminator: {
      propertyName: "type",
      mapping: Object.fromEntries(
        Object.keys(stepInputs).map((name) => [
          name
            .replace("StepInput", "")
            .replace(/(?<=[a-z])(?=[A-Z])/g, "_")
            .toLowerCase(),
          `#/components/schemas/${name}`,
        ]),
      ),
    },
  },
};

/** A workflow's cancel_on, as written and as shown. */
export const cancelOn: JsonSchema = {
  type: "array",
  maxItems: 5,
  items: ref("CancelOn"),
  description: "Events that cancel a run not yet ended: an event of event_type whose paths equal match (templates over the run's input)",
};

export const steps = { type: "array", minItems: 1, maxItems: 50, items: ref("StepInput"), description: "At most 256 KiB as JSON in all" };
