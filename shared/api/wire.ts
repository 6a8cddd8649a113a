import type { ScopeName } from "./scopes";
import type { Environment } from "../storage/types";

/**
 * The API's resources as a client reads them (an answer's `data`, a list's `meta`): the one
 * definition that the server's stored documents extend with their internal fields and its views
 * return, and that the dashboard reads (dashboard/src/api.ts). Types and lists of values only,
 * nothing that needs Node, so the dashboard's bundle takes nothing of the server with them.
 */

/**
 * A list's answer: `{object: "list", data: [...], meta}`: `meta` as the spec fixes it (`total`,
 * `page`, `per_page`) when read by page, or `total`, `limit`, `has_more` when read by cursor.
 */
export interface List<T> {
  object: "list";
  data: T[];
  meta: PageMeta | CursorMeta;
}

/** A list's `meta` when it is read by page (`?page=&per_page=`). */
export interface PageMeta {
  total: number;
  /** More than `total` (10,000) match: pages reach that far. */
  total_capped?: true;
  page: number;
  per_page: number;
}

/** A list's `meta` when it is read by cursor (`?limit=&starting_after=`). */
export interface CursorMeta {
  total: number;
  total_capped?: true;
  limit: number;
  has_more: boolean;
}

/** GET /me: whose key this is and what it may do. */
export interface Me {
  object: "identity";
  org: { id: string; name: string };
  environment: Environment;
  api_key: Pick<ApiKey, "id" | "name" | "prefix" | "last4" | "scopes" | "expires_at">;
}

export type KeyStatus = "active" | "revoked" | "expired";

export interface ApiKey {
  object: "api_key";
  id: string;
  name: string;
  environment: Environment;
  scopes: ScopeName[];
  status: KeyStatus;
  /** The key's first characters (`svc_live_` and four more), to tell keys apart. */
  prefix: string;
  last4: string;
  created_at: string;
  revoked_at: string | null;
  /** The key that revoked this one (null: not revoked, or revoked before the audit trail). */
  revoked_by: Actor | null;
  expires_at: string | null;
  last_used_at: string | null;
}

/** The answer to POST /api-keys, the only one that holds the key itself. */
export type NewApiKey = ApiKey & { key: string };

export interface Webhook {
  object: "webhook";
  id: string;
  environment: Environment;
  url: string;
  events: string[];
  description: string | null;
  status: "enabled" | "disabled";
  /** Why the platform disabled it (failures in a row), or null. */
  disabled_reason: string | null;
  consecutive_failures: number;
  /** Deliveries per second at most, across dispatcher nodes; null: unlimited. */
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
  /** GET /webhooks and GET /webhooks/{id} only: how its attempts are going. */
  health?: WebhookHealth;
}

/**
 * An endpoint's health, from counters kept as attempts end (never a scan of its deliveries): every
 * attempt counts, retries of deliveries still pending included.
 */
export interface WebhookHealth {
  /** The last attempt that reached an answer or failed (`status_code` null: no answer, e.g. a time-out); null before any. */
  last_attempt: { at: string; status_code: number | null; ok: boolean } | null;
  /** Attempts failed in a row up to the last one (0 once one succeeds). */
  consecutive_failed_attempts: number;
  /** Attempts made in the last 24 h (this hour and the 23 before) and the share that succeeded; null without any. */
  attempts_24h: { total: number; succeeded: number; failed: number };
  success_rate_24h: number | null;
}

/** The answers to POST /webhooks and rotate-secret, the only ones that hold the signing secret. */
export type WebhookWithSecret = Webhook & { secret: string };

export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * What an attempt sent: the URL used then (a PATCH of the webhook's URL changes later attempts
 * only) and the headers, without the signatures (secret-derived). The body is the event's payload
 * (`payload` of GET /webhooks/{id}/deliveries/{delivery_id}), not copied per attempt.
 */
export interface AttemptRequest {
  method: "POST";
  url: string;
  headers: Record<string, string>;
  /** The body's length in bytes. */
  body_bytes: number;
}

/**
 * What the receiver answered: bounded (ATTEMPT_RESPONSE_LIMITS). `body` is the first 4 KiB as
 * UTF-8 text, or as base64 with `body_encoding: "base64"` when those bytes are not UTF-8.
 */
export interface AttemptResponse {
  headers: Record<string, string>;
  /** Headers left out (past the count or size bound). */
  headers_omitted?: number;
  body: string;
  body_encoding: "utf8" | "base64";
  /** The whole body's length in bytes as far as it was read (reading stops at 64 KiB). */
  body_bytes: number;
  body_truncated: boolean;
}

/** The bounds of what one attempt keeps of the answer. */
export const ATTEMPT_RESPONSE_LIMITS = {
  bodyBytes: 4096,
  headers: 40,
  headerNameChars: 100,
  headerValueChars: 512,
  headersChars: 4096,
} as const;

/** One try at sending a delivery: a delivery's `attempts` lists them (a run step counts its own in `attempt_count`). */
export interface Attempt {
  number: number;
  at: string;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  /** Absent on attempts made before they were recorded, on attempts that sent nothing, and in lists (the summary). */
  request?: AttemptRequest;
  /** Absent when nothing answered (or in lists). */
  response?: AttemptResponse;
}

export interface Delivery {
  object: "delivery";
  id: string;
  environment: Environment;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: Attempt[];
  next_attempt_at: string | null;
  created_at: string;
  updated_at: string;
  /** A test event sent by POST /webhooks/{id}/test (not in the event log). */
  test?: true;
}

/** GET /webhooks/{id}/deliveries/{delivery_id}: the delivery with its attempts in full and the body sent. */
export interface DeliveryDetail extends Delivery {
  /** The JSON body every attempt sent (the event's payload); null once the event is no longer stored. */
  payload: Record<string, unknown> | null;
}

export const RECOVERY_STATUSES = ["running", "succeeded", "stopped"] as const;
export type RecoveryStatus = (typeof RECOVERY_STATUSES)[number];

/** POST /webhooks/{id}/recover: a background job redelivering a webhook's failed deliveries created in [since, until). */
export interface Recovery {
  object: "recovery";
  id: string;
  environment: Environment;
  webhook_id: string;
  status: RecoveryStatus;
  since: string;
  until: string | null;
  /** Failed deliveries in the range when the job started (counted up to 10,000; `total_capped` past it). */
  total: number;
  total_capped?: true;
  /** Deliveries redelivered so far. A job `stopped` ended early: its webhook was disabled or deleted meanwhile. */
  done: number;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface PlatformEvent {
  object: "event";
  id: string;
  environment: Environment;
  type: string;
  data: Record<string, unknown>;
  /** `api` for events clients emit, else the emitting service. */
  source: string;
  created_at: string;
}

/** One bucket of GET /analytics/usage: requests in an hour or a day, of one route, status or key when grouped. */
export interface UsageBucket {
  start: string;
  route?: string;
  status?: number;
  key_id?: string;
  count: number;
  errors: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

export interface UsageReport {
  object: "usage_report";
  from: string;
  to: string;
  granularity: "hour" | "day";
  group_by: "route" | "status" | "key" | null;
  buckets: UsageBucket[];
}

/** Runs that ended in a window, or webhook deliveries created in it, by status. */
export interface Outcomes {
  total: number;
  by_status: Record<string, number>;
  success_rate: number | null;
  /** Webhooks only: how many attempts were made and how they ended, and the success rate of the deliveries that settled. */
  attempt_counts?: { total: number; succeeded: number; failed: number };
  delivery_success_rate?: number | null;
}

/** GET /analytics/workflows and /analytics/webhooks: the window's outcomes, in all and per workflow or webhook. */
export type OutcomeReport = Outcomes & {
  object: "outcome_report";
  from: string;
  to: string;
  workflows?: (Outcomes & { workflow_id: string })[];
  webhooks?: (Outcomes & { webhook_id: string })[];
};

/** An event trigger's `event_type` may hold `*` for one segment (`order.*`); `filter` is CEL over `event`. */
export type Trigger = { type: "manual" } | { type: "event"; event_type: string; filter?: string } | ScheduleTrigger | WebhookTrigger;

/** Runs started by the clock (docs/workflows/README.md#schedule-trigger): a cron in a time zone, or every `every_ms`. */
export type ScheduleTrigger = {
  type: "schedule";
  /** What a tick does while the previous scheduled run has not ended. */
  overlap: "skip" | "allow" | "buffer_one";
  input: Record<string, unknown>;
  /** A tick missed by at most this long is started late; an older one is recorded as missed. */
  catchup_window_ms: number;
} & ({ cron: string; timezone: string } | { every_ms: number });

/** How an inbound webhook's signature is checked (docs/inbound-webhooks.md). */
export type HookScheme = "standard_webhooks" | "hmac_sha256" | "stripe" | "github" | "none";
export interface HookVerify {
  scheme: HookScheme;
  /** `{{secrets.NAME}}`: a stored secret; absent: the platform's own, shown once. */
  secret?: string;
  /** hmac_sha256: the header holding the signature, its prefix before the digest, and the digest's encoding. */
  header?: string;
  prefix?: string;
  encoding?: "hex" | "base64";
  /** standard_webhooks and stripe: how far the signed timestamp may be from now, in seconds. */
  tolerance_s?: number;
}
/** A workflow started by `POST /v1/hooks/{hook_id}`: verified, filtered (CEL over `request`), deduplicated by a header. */
export interface WebhookTrigger {
  type: "webhook";
  verify: HookVerify;
  dedupe?: { header: string };
  filter?: string;
  /** Request headers the run's input keeps, beside the default ones. */
  headers?: string[];
}

/** A webhook-triggered workflow's hook: where to send, and what it has received. */
export interface Hook {
  id: string;
  /** The path to POST to, under the server's address. */
  url: string;
  /** Where the secret comes from: the platform (`generated`), or `secrets.NAME`; null for scheme none. */
  secret_source: string | null;
  /** Until when the secret a rotation replaced is still accepted, or null. */
  previous_secret_expires_at: string | null;
  /** Requests that started a run, matched none (filtered), repeated a dedupe key, and refused 401. */
  accepted: number;
  filtered: number;
  duplicates: number;
  refused: number;
  last_accepted_at: string | null;
  last_refused_at: string | null;
  /** Why the last refusal was refused: `missing_signature`, `bad_signature`, `stale_timestamp`, … */
  last_refused_reason: string | null;
}

/** What became of a request to a hook. */
export const HOOK_REQUEST_OUTCOMES = ["accepted", "filtered", "duplicate", "refused"] as const;
export type HookRequestOutcome = (typeof HOOK_REQUEST_OUTCOMES)[number];
/** GET /workflows/{id}/hook/requests: one of a hook's recent requests (the newest 100 of a workflow are kept). */
export interface HookRequest {
  object: "hook_request";
  id: string;
  workflow_id: string;
  hook_id: string;
  outcome: HookRequestOutcome;
  /** The HTTP status it was answered: 202 accepted, 200 filtered or duplicate, 401 refused. */
  status: 200 | 202 | 401;
  /** The run it started (accepted), or the first run of its dedupe key (duplicate); null otherwise. */
  run_id: string | null;
  /** Why it was refused: `missing_signature`, `malformed_signature`, `bad_signature`, `stale_timestamp`, `secret_unavailable`; null otherwise. */
  reason: string | null;
  /** The request's `X-Request-Id`, as the platform answered it and logged it. */
  request_id: string | null;
  received_at: string;
}

/** What every step may say besides its own fields (docs/workflows/language.md). */
export interface StepCommon {
  /** CEL, braces optional: false skips the step. */
  if?: string;
  /** `continue`: a failure of the step leaves it `failed` and the run goes on. */
  on_error?: "fail" | "continue";
}

/** When an http step's attempt is tried again (docs/workflows/language.md). */
export interface RetryPolicy {
  max_attempts: number;
  initial_interval_ms: number;
  backoff_rate: number;
  max_interval_ms: number;
  jitter: "full" | "none";
  on: ("timeout" | "network" | "5xx" | "429" | "408" | "4xx")[];
}

export const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

export interface HttpStep extends StepCommon {
  id: string;
  type: "http";
  method: (typeof HTTP_METHODS)[number];
  url: string;
  headers: Record<string, string>;
  body: unknown;
  timeout_ms: number;
  retries: number;
  /** The full retry policy; absent: `retries` with the platform's back-off. */
  retry?: RetryPolicy;
}
export interface DelayStep extends StepCommon {
  id: string;
  type: "delay";
  duration_ms: number;
}
export interface ApprovalStep extends StepCommon {
  id: string;
  type: "approval";
  message: string | null;
  /** No decision within this: the step fails with `timed_out`. */
  timeout_ms?: number;
}
export interface EmitStep extends StepCommon {
  id: string;
  type: "emit";
  event_type: string;
  data: Record<string, unknown>;
}
/** Ends the run with `status`; later steps are skipped; `message` (templates filled) is kept as the run's `stop_message`. */
export interface StopStep extends StepCommon {
  id: string;
  type: "stop";
  status: "succeeded" | "failed";
  message: string | null;
}
/** Its output is `output` with its templates filled; no I/O. */
export interface SetStep extends StepCommon {
  id: string;
  type: "set";
  output: unknown;
}
/**
 * Waits for an event of `event_type` whose paths equal `match` (templates filled when the wait
 * begins) and that `filter` (CEL over `event`) lets through; its output is the event. No such event
 * within `timeout_ms`: the step fails with `timed_out`.
 */
export interface WaitForEventStep extends StepCommon {
  id: string;
  type: "wait_for_event";
  event_type: string;
  match: Record<string, unknown>;
  filter?: string;
  timeout_ms: number;
}

/** A workflow's `cancel_on` entry: an event of `event_type` whose paths equal `match` (templates over the run's input) cancels the run. */
export interface CancelOn {
  event_type: string;
  match: Record<string, unknown>;
}
/** Runs a saved workflow of the same environment as a child run (docs/workflows/README.md#run_workflow). */
export interface RunWorkflowStep extends StepCommon {
  id: string;
  type: "run_workflow";
  /** A workflow id, or a template that gives one when the step runs. */
  workflow_id: string;
  /** The child's input, its templates filled. */
  input: Record<string, unknown>;
  /** true: the step waits for the child and gives its output; false: it gives `{run_id}` at once. */
  wait: boolean;
  /** With wait: the child not ended within this, it is cancelled and the step fails with `timed_out`. */
  timeout_ms?: number;
}
/** Runs steps once per item of a list, each as a child run (docs/workflows/README.md#map). */
export interface MapStep extends StepCommon {
  id: string;
  type: "map";
  /** A template that gives a list of at most 1,000 items. */
  items: string;
  /** Children unfinished at once: 1..100. */
  max_concurrency: number;
  /** Failed children the step tolerates; one more fails it. */
  tolerated_failures: number;
  /** The steps each child runs (its input is `{item, index}`), or else `workflow_id`. */
  steps?: Step[];
  workflow_id?: string;
}
/** Runs each branch's steps as a child run, all at once (docs/workflows/README.md#parallel). */
export interface ParallelStep extends StepCommon {
  id: string;
  type: "parallel";
  /** 1..10 branches by name, each a list of steps; each child's input is the run's input. */
  branches: Record<string, Step[]>;
}
export type Step =
  HttpStep | DelayStep | ApprovalStep | EmitStep | StopStep | SetStep | WaitForEventStep | RunWorkflowStep | MapStep | ParallelStep;

/** At most `limit` runs of one key unfinished at once; the others wait `queued` (docs/workflows/README.md#flow-control). */
export interface FlowConcurrency {
  limit: number;
  /** A template over the run's input (absent: one key for the whole workflow). */
  key?: string;
}
/** At most `limit` runs of one key started per `period_ms`; the others wait `queued` for the next window. */
export interface FlowThrottle {
  limit: number;
  period_ms: number;
  key?: string;
}

/** A burst of starts of one key (each within `period_ms` of the last) starts one run, with the last input, at most `max_wait_ms` after the first. */
export interface FlowDebounce {
  period_ms: number;
  max_wait_ms?: number;
  key?: string;
}

export interface Workflow {
  object: "workflow";
  id: string;
  environment: Environment;
  name: string;
  description: string | null;
  status: "active" | "inactive";
  trigger: Trigger;
  steps: Step[];
  /** The most a run may take, in ms; a run over it fails with `run_timed_out`. Null: no limit. */
  timeout_ms?: number | null;
  /** Events that cancel a run not yet ended (absent: none). */
  cancel_on?: CancelOn[];
  /** Templates over the run's steps, filled when a run succeeds: its runs' `output` (absent: the last succeeded step's output). */
  output?: unknown;
  /** Runs per key at once (absent: no limit). */
  concurrency?: FlowConcurrency;
  /** Starts per key per period (absent: no limit). */
  throttle?: FlowThrottle;
  /** One run per burst of starts of a key (absent: every start is a run). */
  debounce?: FlowDebounce;
  version: number;
  created_at: string;
  updated_at: string;
  /** Schedule triggers: the next tick (null while the workflow is inactive). */
  next_run_at?: string | null;
  /** A webhook trigger's hook (docs/inbound-webhooks.md). */
  hook?: Hook;
}

/** A tick of a schedule that started no run: `skipped` (overlap) or `missed` (a gap older than the catch-up window, in one entry). */
export interface ScheduleMiss {
  outcome: "skipped" | "missed";
  scheduled_at: string;
  /** `missed`: the last tick of the gap, and how many ticks it held (counted up to 10,000). */
  last_scheduled_at?: string;
  ticks?: number;
  recorded_at: string;
}

/** GET /workflows/{id}/schedule: when a schedule ticks next, and the ticks that started no run. */
export interface Schedule {
  object: "schedule";
  workflow_id: string;
  next_run_at: string | null;
  /** The next ticks (at most 5), none while the workflow is inactive. */
  upcoming: string[];
  /** buffer_one: the tick waiting for the previous run to end. */
  buffered_at: string | null;
  last_run_id: string | null;
  missed_count: number;
  skipped_count: number;
  /** The newest ticks that started no run, newest first (at most 20). */
  recent: ScheduleMiss[];
}

/** POST /workflows/{id}/schedule/backfill: the runs started for the range's ticks, and the ticks that had one. */
export interface ScheduleBackfill {
  object: "schedule_backfill";
  workflow_id: string;
  from: string;
  to: string;
  ticks: number;
  started: { scheduled_at: string; run_id: string }[];
  already_started: string[];
}

/** POST /workflows/validate: a definition as POST /workflows would store it (its defaults filled in). */
export type WorkflowDefinition = { object: "workflow_definition" } & Pick<
  Workflow,
  "name" | "description" | "status" | "trigger" | "steps" | "timeout_ms" | "cancel_on" | "output" | "concurrency" | "throttle" | "debounce"
>;

/** The answers to POST /workflows and its rotate-secret, the only ones that hold the signing secret of its http steps. */
export type WorkflowWithSecret = Workflow & { signing_secret: string; hook_secret?: string };

/** A secret as the API shows it: never its value. */
export interface Secret {
  object: "secret";
  name: string;
  environment: Environment;
  /** The SECRETS_KEYS key that encrypts it (a rotation re-encrypts each under the new key on its next use or write). */
  key_id: string;
  created_at: string;
  updated_at: string;
}

export const RUN_STATUSES = ["queued", "running", "waiting", "succeeded", "failed", "cancelled"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** A run in one of these has ended: nothing changes it any more. */
export const FINISHED_RUN_STATUSES = ["succeeded", "failed", "cancelled"] as const satisfies readonly RunStatus[];

export type StepStatus = "pending" | "running" | "waiting" | "succeeded" | "failed" | "cancelled" | "skipped";

/** Who did something through the API: the key it used, by id and by its name then (null: not known). */
export interface Actor {
  key_id: string;
  key_name: string | null;
}

/** A person's answer to an approval step. */
export interface ApprovalDecision {
  decision: "approved" | "rejected";
  comment: string | null;
  decided_by: Actor;
  decided_at: string;
}

export interface RunStep {
  id: string;
  type: Step["type"];
  status: StepStatus;
  output: unknown;
  error: string | null;
  /** How many times the step was tried (a delivery's `attempts` is the list of its tries). */
  attempt_count: number;
  /** A rerun from a later step (POST …/rerun with `from_step`): the run this step's result was copied from. */
  copied_from?: string;
  started_at: string | null;
  finished_at: string | null;
  /** Approval steps, once reached: the step's message with its templates filled (null: the step has none). */
  message?: string | null;
  /** Approval steps, once decided. */
  decision?: ApprovalDecision | null;
  /** wait_for_event steps, once reached: the event they wait for, its match with the templates filled. */
  waiting_for?: { event_type: string; match: Record<string, unknown> } | null;
  /** Approval, wait_for_event and run_workflow steps with a timeout_ms, while they wait: when they time out. */
  timeout_at?: string | null;
  /** http steps: the newest attempts (at most 10), each with why it failed. */
  attempts?: StepAttempt[];
  /** Failed steps: what kind of failure (`step_failed`, `template_error`, `timed_out`, `stopped`). */
  error_code?: string | null;
}

/** One attempt of an http step. */
export interface StepAttempt {
  attempt: number;
  started_at: string;
  finished_at: string;
  status_code?: number;
  error: string | null;
}

/** The approval a waiting run asks for: its step and message. */
export interface PendingApproval {
  step_id: string;
  message: string | null;
  requested_at: string;
}

export type RunTrigger =
  | { type: "manual" }
  | { type: "event"; event_id: string; event_type: string }
  /** `tick`: the schedule's clock; `trigger`: POST …/schedule/trigger; `backfill`: POST …/schedule/backfill. */
  | { type: "schedule"; scheduled_at: string; source: "tick" | "trigger" | "backfill" }
  | { type: "parent" }
  | { type: "webhook"; hook_id: string; request_id: string; dedupe_key: string | null };

/** A child run's parent: the run, its step that started the child, and the child's index there (0 for run_workflow). */
export interface RunParent {
  run_id: string;
  step_id: string;
  index: number;
}

export interface Run {
  object: "run";
  id: string;
  environment: Environment;
  workflow_id: string;
  workflow_version: number;
  status: RunStatus;
  input: Record<string, unknown>;
  steps: RunStep[];
  trigger: RunTrigger;
  /** 1, and one more with every retry of the run (POST …/retry). */
  attempt: number;
  /** The run this one reruns (POST …/rerun), or null. */
  rerun_of: string | null;
  /** While the run waits for a person: what it asks; null otherwise. */
  pending_approval: PendingApproval | null;
  /** Who cancelled the run (POST …/cancel, or deleting its workflow), once cancelled through the API. */
  cancelled_by?: Actor | null;
  /** Why it was cancelled: `requested` (POST …/cancel), `workflow_deleted`, `cancel_on` (an event of the workflow's cancel_on), or `parent_ended` (a child run whose parent failed or was cancelled). */
  cancel_reason?: "requested" | "workflow_deleted" | "cancel_on" | "parent_ended" | null;
  /** Cancelled by `cancel_on`: the event that matched. */
  cancel_event_id?: string | null;
  /** While the run waits `queued` behind its workflow's flow control: `concurrency` or `throttle`; null otherwise. */
  queued_reason?: "concurrency" | "throttle" | "debounce" | "start_budget" | null;
  /** The flow-control key the run counts under (its workflow's key template over its input), or null. */
  flow_key?: string | null;
  /** The message of the stop step that ended the run, or null. */
  stop_message?: string | null;
  /** Its workflow's `timeout_ms` when the run started, or null: no limit. */
  timeout_ms?: number | null;
  /** When the run fails with `run_timed_out` if it has not ended (its start, or its last retry, plus `timeout_ms`), or null. */
  deadline_at?: string | null;
  /** A child run's parent (a run_workflow step started it), or null. */
  parent?: RunParent | null;
  /** Once the run succeeded: its workflow's `output` filled, else its last succeeded step's output; null before. */
  output?: unknown;
  /** Why a run failed that no step failed: its workflow's `output` could not be filled. */
  error?: { code: string; message: string } | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** GET /workflows/{id}/versions/{version}: a workflow's definition as one of its versions left it. */
export interface WorkflowVersion {
  object: "workflow_version";
  workflow_id: string;
  version: number;
  name: string;
  description: string | null;
  status: Workflow["status"];
  trigger: Trigger;
  steps: Step[];
  timeout_ms?: number | null;
  cancel_on?: CancelOn[];
  output?: unknown;
  concurrency?: FlowConcurrency;
  throttle?: FlowThrottle;
  debounce?: FlowDebounce;
  created_at: string;
  created_by: Actor | null;
}

/** GET /events/types: a type the platform emits, or a custom one this environment has emitted. */
export type EventType =
  | { object: "event_type"; type: string; description: string; system: true }
  | { object: "event_type"; type: string; description: null; system: false; first_seen_at: string };

/** GET /orgs/{id}/environments: the two every organization has. */
export interface EnvironmentInfo {
  object: "environment";
  id: Environment;
  org_id: string;
  name: string;
  description: string;
}

/**
 * One line of the audit log (`GET /audit-log`): a mutation made through the API that succeeded, by
 * whom (the key: keys belong to the organization, not to a member), what (the route and a stable
 * action name such as `webhook.created`), to which resource, from where and when. No request or
 * answer body is kept, so no secret, key or signing secret can appear in one.
 */
export interface AuditEntry {
  object: "audit_entry";
  id: string;
  /** The environment of the key that made the change. */
  environment: Environment;
  actor: Actor;
  /** Stable name of what was done, `<resource>.<verb>`: `webhook.created`, `run.approved`, `member.role_changed`, … */
  action: string;
  /** The operation as the API reference names it: method and route template (`POST /webhooks/{id}/rotate-secret`). */
  method: string;
  route: string;
  resource: { type: string; id: string | null };
  request_id: string;
  /** The client's address as the gateway saw it (X-Forwarded-For's last with TRUST_PROXY). */
  client_address: string;
  /** The HTTP status answered (2xx: only successful mutations are recorded). */
  status: number;
  created_at: string;
}

export const BULK_ACTIONS = ["retry", "rerun", "cancel"] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];
export const BULK_JOB_STATUSES = ["running", "succeeded", "cancelled"] as const;
export type BulkJobStatus = (typeof BULK_JOB_STATUSES)[number];

/** Which runs a bulk job acts on (times as ISO 8601: created_after ≤ created_at < created_before). */
export interface BulkJobFilter {
  workflow_id?: string;
  status?: RunStatus;
  created_after?: string;
  created_before?: string;
  /** Failed runs whose failing step has this id. */
  failed_step?: string;
}

/** POST /runs/bulk: a background job retrying, rerunning or cancelling the runs a filter picks. */
export interface BulkJob {
  object: "bulk_job";
  id: string;
  environment: Environment;
  action: BulkAction;
  filter: BulkJobFilter;
  status: BulkJobStatus;
  /** Runs in the filter's index range when the job started (counted up to 10,000; `total_capped` past it), before their status was checked. */
  total: number;
  total_capped?: true;
  /** Runs the job found the action applies to, so far; each is then either done or failed. */
  matched: number;
  done: number;
  /** Runs whose action was refused (a run that changed meanwhile, a workflow made inactive, …); `last_error` says why. */
  failed: number;
  last_error: string | null;
  created_by: Actor;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}
