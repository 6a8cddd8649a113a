import { ApiError, echo, invalidParam, notOneOf, type ErrorCode } from "../../shared/errors";
import { EVENT_TYPE_PATTERN, isReservedType } from "../../shared/records/events";
import { formatPath } from "../../shared/api/json-limits";
import { checkTargetUrl, type TargetRules } from "../../shared/net/net-guard";
import { checkCondition, checkTemplates, type Fault } from "./expressions/check";
import { checkRetry } from "./retry.logic";
import { checkFanOut } from "./fan-out.check";
import { checkWaitStep } from "./waits.logic";
import type { ScheduleState } from "./schedule-ticks.logic";
import { isId } from "../../shared/ids";
import { hookView, type HookDoc } from "./hooks.logic";
import {
  HTTP_METHODS,
  type Actor,
  type HttpStep,
  type Step,
  type StepCommon,
  type Workflow,
  type WorkflowVersion,
} from "../../shared/api/wire";

/**
 * Workflows (contract section 6): a trigger and 1..50 typed steps, checked when they are written so
 * that a run never meets a step it cannot execute. Every error names the step and the field.
 */
export const MAX_STEPS = 50;
export const STEP_TYPES = [
  "http",
  "delay",
  "approval",
  "emit",
  "stop",
  "set",
  "wait_for_event",
  "run_workflow",
  "map",
  "parallel",
] as const;
export type StepType = (typeof STEP_TYPES)[number];
export const HTTP_TIMEOUT_MAX_MS = 60_000;
export const HTTP_TIMEOUT_DEFAULT_MS = 10_000;
export const HTTP_RETRIES_MAX = 10;
export const DELAY_MAX_MS = 30 * 24 * 60 * 60 * 1000;
/** JSON size of a step's `body` or `data`, and of a whole workflow's steps. */
export const STEP_VALUE_MAX_BYTES = 64 * 1024;
const STEP_ID = /^[a-z][a-z0-9_]{0,49}$/;

export {
  HTTP_METHODS,
  type ApprovalStep,
  type DelayStep,
  type EmitStep,
  type HttpStep,
  type SetStep,
  type Step,
  type StopStep,
  type WaitForEventStep,
} from "../../shared/api/wire";

/** A workflow as stored: what the API shows (shared/api/wire.ts), its organization and the secrets that sign its http steps. */
export interface WorkflowDoc extends Omit<Workflow, "object" | "hook"> {
  org_id: string;
  /** Absent on workflows stored before steps were signed: their requests go unsigned until a rotate-secret. */
  signing_secret?: string;
  /** The secret a rotation replaced, signing beside the new one until `expires_at`. */
  previous_signing_secret?: { secret: string; expires_at: string };
  /** Schedule triggers: when it ticks and what its ticks did (schedule-ticks.logic.ts). */
  schedule?: ScheduleState;
  /** A webhook trigger's hook, with its secret (hooks.logic.ts): shown without it. */
  hook?: HookDoc;
}

export type WorkflowView = Workflow;
export const workflowView = ({
  org_id: _o,
  signing_secret: _s,
  previous_signing_secret: _p,
  schedule,
  hook,
  ...view
}: WorkflowDoc): WorkflowView => ({
  object: "workflow",
  ...view,
  ...(view.trigger.type === "schedule" && {
    next_run_at: schedule?.next_at !== undefined ? new Date(schedule.next_at).toISOString() : null,
  }),
  ...(hook && view.trigger.type === "webhook" && { hook: hookView(hook, view.trigger.verify) }),
});

/** The secrets that sign a step's request now: the current one first, the rotated-out one during its overlap. */
export function signingSecrets(doc: Pick<WorkflowDoc, "signing_secret" | "previous_signing_secret">, nowMs: number): string[] {
  if (!doc.signing_secret) return [];
  const previous = doc.previous_signing_secret;
  return previous && Date.parse(previous.expires_at) > nowMs ? [doc.signing_secret, previous.secret] : [doc.signing_secret];
}

/** How many versions of one workflow are kept (the newest): older ones are deleted as new ones come. */
export const VERSIONS_KEPT = 100;

/** A version of a workflow as stored (`<workflow_id>/v<version>`): what the API shows and the tenant. */
export interface WorkflowVersionDoc extends Omit<WorkflowVersion, "object"> {
  id: string;
  org_id: string;
  environment: Workflow["environment"];
}

export const versionId = (workflowId: string, version: number): string => `${workflowId}/v${version}`;

/** The version a workflow's write leaves, made by `by`. */
export const versionOf = (doc: WorkflowDoc, by: Actor | null): WorkflowVersionDoc => ({
  id: versionId(doc.id, doc.version),
  org_id: doc.org_id,
  environment: doc.environment,
  workflow_id: doc.id,
  version: doc.version,
  name: doc.name,
  description: doc.description,
  status: doc.status,
  trigger: doc.trigger,
  steps: doc.steps,
  timeout_ms: doc.timeout_ms ?? null,
  ...(doc.cancel_on && { cancel_on: doc.cancel_on }),
  ...(doc.output !== undefined && { output: doc.output }),
  ...(doc.concurrency && { concurrency: doc.concurrency }),
  ...(doc.throttle && { throttle: doc.throttle }),
  ...(doc.debounce && { debounce: doc.debounce }),
  created_at: doc.updated_at,
  created_by: by,
});

export const versionView = ({ id: _i, org_id: _o, environment: _e, ...view }: WorkflowVersionDoc): WorkflowVersion => ({
  object: "workflow_version",
  ...view,
});

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const jsonBytes = (v: unknown): number => Buffer.byteLength(JSON.stringify(v ?? null));

/** Where a step's problem is, for the error: `steps[2].url`, with the step's id in the message. */
class StepFault {
  constructor(
    private readonly index: number,
    private readonly id: string | undefined,
  ) {}

  /** `field` is a path inside the step as formatPath writes it (`url`, `body.a[0]`, `["a.b"]`). */
  param(field?: string): string {
    return `steps[${this.index}]${field ? (field.startsWith("[") ? field : `.${field}`) : ""}`;
  }

  error(field: string | undefined, message: string, code: ErrorCode = "parameter_invalid"): ApiError {
    const which = this.id ? `step '${this.id}' (steps[${this.index}])` : `steps[${this.index}]`;
    return new ApiError(code, `${which}: ${message}`, { param: this.param(field) });
  }
}

const FIELDS: Record<StepType, readonly string[]> = {
  http: ["method", "url", "headers", "body", "timeout_ms", "retries", "retry"],
  delay: ["duration_ms"],
  approval: ["message", "timeout_ms"],
  emit: ["event_type", "data"],
  stop: ["status", "message"],
  set: ["output"],
  wait_for_event: ["event_type", "match", "filter", "timeout_ms"],
  run_workflow: ["workflow_id", "input", "wait", "timeout_ms"],
  map: ["items", "max_concurrency", "tolerated_failures", "steps", "workflow_id"],
  parallel: ["branches"],
};
/** Fields that hold steps: checked as steps of their own (fan-out.check.ts), not as templates over this list's. */
const NESTED = new Set(["steps", "branches"]);
/** Fields every step may have (docs/workflows/language.md). */
const COMMON = ["if", "on_error"] as const;
/** Steps whose failure `on_error: continue` can pass over (a stop step's failure is the point). */
const CAN_FAIL: ReadonlySet<StepType> = new Set([
  "http",
  "approval",
  "emit",
  "set",
  "delay",
  "wait_for_event",
  "run_workflow",
  "map",
  "parallel",
]);

function integerIn(fault: StepFault, field: string, value: unknown, min: number, max: number, fallback?: number): number {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw fault.error(field, `${field} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

const hasTemplate = (s: string): boolean => s.includes("{{");

/**
 * The steps, checked and completed with their defaults. A literal `http` URL passes the webhook URL
 * rules now (https, public addresses); one with templates is checked when the run resolves it.
 */
/** Step fields whose value may be null (as the API reference's step schemas say). */
const NULLABLE: Partial<Record<StepType, readonly string[]>> = {
  http: ["body"],
  set: ["output"],
  approval: ["message"],
  stop: ["message"],
};

export async function checkSteps(raw: unknown, rules: TargetRules, depth = 0): Promise<Step[]> {
  if (!Array.isArray(raw) || raw.length < 1 || raw.length > MAX_STEPS) {
    throw invalidParam("steps", `steps must be a list of 1 to ${MAX_STEPS} steps`);
  }
  if (jsonBytes(raw) > 4 * STEP_VALUE_MAX_BYTES)
    throw invalidParam("steps", `the steps are over ${4 * STEP_VALUE_MAX_BYTES} bytes as JSON`);
  const earlier = new Set<string>();
  const steps: Step[] = [];
  for (const [index, item] of raw.entries()) {
    const fault = new StepFault(index, isObject(item) && typeof item.id === "string" ? item.id : undefined);
    if (!isObject(item)) throw fault.error(undefined, "each step must be an object with an id and a type");
    const id = item.id ?? `step_${index + 1}`;
    if (typeof id !== "string" || !STEP_ID.test(id)) {
      throw fault.error("id", "id must start with a lower-case letter and hold only a-z, 0-9 and _ (at most 50)");
    }
    if (earlier.has(id)) throw fault.error("id", `the id '${id}' is used by an earlier step`);
    const type = item.type as StepType;
    if (!STEP_TYPES.includes(type))
      throw fault.error("type", `type must be one of ${STEP_TYPES.map((t) => JSON.stringify(t)).join(", ")}; received ${echo(type)}`);
    // null is a value only where the API reference says so (docs/api-conventions.md); anywhere else
    // it is refused, not read as "left out".
    const nulled = Object.keys(item).find((k) => item[k] === null && !(NULLABLE[type] ?? []).includes(k));
    if (nulled !== undefined) throw fault.error(formatPath([nulled]), `${nulled} must not be null; leave it out to take its default`);
    const extra = Object.keys(item).find(
      (k) => k !== "id" && k !== "type" && !FIELDS[type].includes(k) && !(COMMON as readonly string[]).includes(k),
    );
    if (extra !== undefined) {
      throw fault.error(
        formatPath([extra]),
        `${/^[aeiou]/.test(type) ? "an" : "a"} ${type} step has no field ${JSON.stringify(extra)} (it takes ${[...FIELDS[type], ...COMMON].join(", ")})`,
        "parameter_unknown",
      );
    }
    const faultAt: Fault = (field, message) => fault.error(field, message);
    // A wait's match holds templates, its filter is CEL over the event: waits.logic.ts checks both.
    if (type !== "wait_for_event")
      for (const field of FIELDS[type]) if (!NESTED.has(field)) checkTemplates(faultAt, field, item[field], earlier, type);
    const common: StepCommon = {};
    if (item.if !== undefined) common.if = checkCondition(faultAt, "if", item.if, "step", earlier);
    if (item.on_error !== undefined) {
      if (item.on_error !== "fail" && item.on_error !== "continue")
        throw fault.error("on_error", `on_error must be "fail" or "continue"; received ${echo(item.on_error)}`);
      if (!CAN_FAIL.has(type)) throw fault.error("on_error", `a ${type} step takes no on_error`);
      common.on_error = item.on_error;
    }
    const step =
      type === "wait_for_event" ? checkWaitStep(faultAt, id, item, earlier) : await checkStep(fault, id, type, item, rules, depth);
    steps.push({ ...step, ...common });
    earlier.add(id);
  }
  return steps;
}

/** A step's full retry policy: when given, it replaces `retries`, its short form. */
function retryOf(fault: StepFault, item: Record<string, unknown>) {
  return checkRetry(item.retry, (field, message) => fault.error(field, message));
}

async function checkStep(
  fault: StepFault,
  id: string,
  type: Exclude<StepType, "wait_for_event">,
  item: Record<string, unknown>,
  rules: TargetRules,
  depth: number,
): Promise<Step> {
  switch (type) {
    case "http": {
      const method = item.method ?? "POST";
      if (!HTTP_METHODS.includes(method as HttpStep["method"]))
        throw fault.error(
          "method",
          `method must be one of ${HTTP_METHODS.map((m) => JSON.stringify(m)).join(", ")}; received ${echo(method)}`,
        );
      if (typeof item.url !== "string" || item.url.length === 0 || item.url.length > 2048) {
        throw fault.error("url", "url must be an absolute URL of at most 2048 characters");
      }
      if (!hasTemplate(item.url)) {
        try {
          await checkTargetUrl(item.url, rules);
        } catch (err) {
          if (err instanceof ApiError) throw fault.error("url", err.message, err.type as ErrorCode);
          throw err;
        }
      }
      const headers = item.headers ?? {};
      if (!isObject(headers) || Object.values(headers).some((v) => typeof v !== "string") || Object.keys(headers).length > 50) {
        throw fault.error("headers", "headers must be an object of at most 50 names with string values");
      }
      const bad = Object.keys(headers).find((h) => !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(h));
      if (bad !== undefined) throw fault.error(formatPath([bad], "headers"), `${JSON.stringify(bad)} is not a valid header name`);
      // The URL names the host; the engine sets the chain a request carries back to the platform.
      const owned = Object.keys(headers).find((h) => ["host", "service-chain"].includes(h.toLowerCase()));
      if (owned !== undefined)
        throw fault.error(formatPath([owned], "headers"), `${JSON.stringify(owned)} is set by the platform, not by a step`);
      if (item.body !== undefined && jsonBytes(item.body) > STEP_VALUE_MAX_BYTES) {
        throw fault.error("body", `body is over ${STEP_VALUE_MAX_BYTES} bytes as JSON`);
      }
      return {
        id,
        type,
        method: method as HttpStep["method"],
        url: item.url,
        headers: headers as Record<string, string>,
        body: item.body ?? null,
        timeout_ms: integerIn(fault, "timeout_ms", item.timeout_ms, 1, HTTP_TIMEOUT_MAX_MS, HTTP_TIMEOUT_DEFAULT_MS),
        retries: integerIn(fault, "retries", item.retries, 0, HTTP_RETRIES_MAX, 0),
        ...(item.retry !== undefined && { retry: retryOf(fault, item) }),
      };
    }
    case "delay":
      return { id, type, duration_ms: integerIn(fault, "duration_ms", item.duration_ms, 1, DELAY_MAX_MS) };
    case "approval": {
      const message = item.message ?? null;
      if (message !== null && (typeof message !== "string" || message.length > 1000)) {
        throw fault.error("message", "message must be a string of at most 1000 characters");
      }
      return {
        id,
        type,
        message,
        ...(item.timeout_ms !== undefined && { timeout_ms: integerIn(fault, "timeout_ms", item.timeout_ms, 1, DELAY_MAX_MS) }),
      };
    }
    case "emit": {
      const eventType = item.event_type;
      if (typeof eventType !== "string" || !EVENT_TYPE_PATTERN.test(eventType)) {
        throw fault.error("event_type", "event_type must be an event type such as 'order.shipped'");
      }
      if (isReservedType(eventType))
        throw fault.error("event_type", `'${eventType}' is a system event type; workflows emit custom types only`);
      const data = item.data ?? {};
      if (!isObject(data)) throw fault.error("data", "data must be an object");
      if (jsonBytes(data) > STEP_VALUE_MAX_BYTES) throw fault.error("data", `data is over ${STEP_VALUE_MAX_BYTES} bytes as JSON`);
      return { id, type, event_type: eventType, data };
    }
    case "stop": {
      if (item.status !== "succeeded" && item.status !== "failed")
        throw notOneOf(fault.param("status"), ["succeeded", "failed"], item.status);
      const message = item.message ?? null;
      if (message !== null && (typeof message !== "string" || message.length > 1000))
        throw fault.error("message", "message must be a string of at most 1000 characters");
      return { id, type, status: item.status, message };
    }
    case "set": {
      if (item.output === undefined) throw fault.error("output", "a set step needs an output: the value (with templates) it gives");
      if (jsonBytes(item.output) > STEP_VALUE_MAX_BYTES)
        throw fault.error("output", `output is over ${STEP_VALUE_MAX_BYTES} bytes as JSON`);
      return { id, type, output: item.output };
    }
    case "run_workflow":
      return checkRunWorkflow(fault, id, item);
    case "map":
    case "parallel":
      return checkFanOut({ param: (f) => fault.param(f), error: (f, m, c) => fault.error(f, m, c) }, id, type, item, {
        depth,
        steps: (raw, d) => checkSteps(raw, rules, d),
      });
  }
}

/**
 * A run_workflow step: a workflow id (one of this environment's, looked up by the service when it
 * is literal: child-runs.logic.ts `literalWorkflowIds`) or a template giving one; an input object.
 */
function checkRunWorkflow(fault: StepFault, id: string, item: Record<string, unknown>): Step {
  const target = item.workflow_id;
  if (typeof target !== "string" || target.length === 0 || target.length > 2000 || (!hasTemplate(target) && !isId("wf", target)))
    throw fault.error("workflow_id", "workflow_id must be a workflow's id (wf_…), or a template that gives one");
  const input = item.input ?? {};
  if (!isObject(input)) throw fault.error("input", "input must be an object: the child run's input (templates allowed)");
  if (jsonBytes(input) > STEP_VALUE_MAX_BYTES) throw fault.error("input", `input is over ${STEP_VALUE_MAX_BYTES} bytes as JSON`);
  const wait = item.wait ?? true;
  if (typeof wait !== "boolean") throw fault.error("wait", `wait must be true or false; received ${echo(wait)}`);
  if (item.timeout_ms !== undefined && !wait)
    throw fault.error("timeout_ms", "timeout_ms needs wait: true (a step that does not wait cannot time out)");
  const timeout = item.timeout_ms === undefined ? {} : { timeout_ms: integerIn(fault, "timeout_ms", item.timeout_ms, 1, DELAY_MAX_MS) };
  return { id, type: "run_workflow", workflow_id: target, input, wait, ...timeout };
}

/**
 * A workflow's `output`: templates over its steps (every step is earlier by then), filled when a
 * run succeeds. Absent stays absent (the run's output is then its last succeeded step's).
 */
export function checkOutput(raw: unknown, steps: readonly Step[]): unknown {
  if (raw === undefined || raw === null) return undefined;
  if (jsonBytes(raw) > STEP_VALUE_MAX_BYTES) throw invalidParam("output", `output is over ${STEP_VALUE_MAX_BYTES} bytes as JSON`);
  const ids = new Set(steps.map((s) => s.id));
  checkTemplates((field, message) => invalidParam(field, `${field}: ${message}`), "output", raw, ids, "output");
  return raw;
}
