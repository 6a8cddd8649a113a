import { randomUUID } from "node:crypto";
import type { ServiceBroker } from "moleculer";
import type { Agent } from "undici";
import { publishEvents, type EventDoc, type PublishedEvent } from "../../shared/records/events";
import { FailureLog } from "../../shared/runtime/failure-log";
import { describeJsonFault, parseJsonWithinLimits } from "../../shared/api/json-limits";
import { checkTargetUrl } from "../../shared/net/net-guard";
import { outbound, outboundAgent } from "../../shared/net/outbound";
import { childTraceparent } from "../../shared/runtime/trace";
import { standardHeaders } from "../../shared/net/signing";
import { ALL_TENANTS, type Collection, type ReadView, type Tenant } from "../../shared/storage/types";
import { cutAnswer, redact, redactAnswer } from "./outputs";
import {
  attempted,
  claim,
  claimedAtStart,
  fail,
  giveUp,
  handBack,
  MAX_STALLS,
  nextMove,
  published,
  updateOf,
  type Attempt,
  type Clock,
  type HttpRequest,
  type OutboxEvent,
  type RunDoc,
  type RunWrite,
} from "./runs.logic";
import { SecretUnavailable, secretNames } from "./secrets.logic";
import { signingSecrets, type WorkflowDoc } from "./workflows.logic";

/** Broker event: a run is due now (started, approved, cancelled); one workflows node takes it. */
export const RUN_DUE = "workflow_run.due";

/** A claim outlives the longest step it may cover (an http attempt) by this much. */
const LEASE_MARGIN_MS = 5_000;
const POLL_MS = 500;
/** After failed polls (the store failing), the next waits 1 s, 2 s, 4 s, … at most this long. */
const POLL_BACKOFF_MAX_MS = 5_000;
/** Waits up to this long are also kept by a local timer, not only found by the poll. */
const LOCAL_TIMER_MAX_MS = 60_000;
/** Bytes of an http step's answer kept as its output. */
const ANSWER_LIMIT = 64 * 1024;

export interface EngineOptions {
  runs: Collection<RunDoc>;
  /** Read for the signing secrets of a run's workflow, at each http attempt (a rotation applies at once). */
  workflows: ReadView<WorkflowDoc>;
  /** The values of the secrets a step uses (secrets.service.ts); SecretUnavailable when one cannot be had. */
  secretValues: (tenant: Required<Tenant>, names: readonly string[]) => Promise<Record<string, string>>;
  broker: ServiceBroker;
  logger: ServiceBroker["logger"];
  allowPrivate: boolean;
  retryBaseMs: number;
  /** Runs this node drives at once. */
  maxActive: number;
  /** How long a claim outlives the step it covers (default 5 s; tests shorten it). */
  leaseMarginMs?: number;
  /** Told once per run, when its `workflow.completed` is stored (a publish repeated after a crash finds it stored). */
  ended?: (event: EventDoc) => void;
}

export type Claimed = RunDoc & { lease: string };

/**
 * Executes the run state machine (runs.logic.ts), durably: a node claims a due run with a
 * compare-and-set lease, does its steps' work (publishing its outbox, http attempts) and stores each
 * transition's write under its lease, so a node killed mid-run leaves a run that
 * falls due again when the lease runs out and any workflows node resumes it at the step it was on.
 * Waits (a delay, an http retry's back-off) are stored due times; a run waiting for approval has no
 * due time and is only moved by the API.
 *
 * A failing store (`storage_unavailable`) stops a run's drive where it is: nothing is reported done
 * that was not stored, the claim lapses and the run is claimed again once the store takes writes
 * (polls back off meanwhile). Every claim counts in the run (`stalls`) and every stored step of
 * progress resets the count, so a run that cannot make progress (its result never gets stored, so
 * its http step would be sent again and again) is given up after MAX_STALLS claims: it fails at its
 * step with an error saying why.
 */
export class RunEngine {
  private active = 0;
  private stopping = false;
  private poller: NodeJS.Timeout | undefined;
  private polling = false;
  private readonly driving = new Set<Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly agent: Agent;
  private readonly leaseMarginMs: number;
  private readonly failures: FailureLog;
  /** Polls in a row that failed, and when the next may run. */
  private pollFailures = 0;
  private pollAfter = 0;

  constructor(private readonly o: EngineOptions) {
    this.agent = outboundAgent(o.allowPrivate, { keepAliveMs: 10_000 });
    this.leaseMarginMs = o.leaseMarginMs ?? LEASE_MARGIN_MS;
    this.failures = new FailureLog(o.logger);
  }

  start(): void {
    this.poller = setInterval(() => void this.poll(), POLL_MS);
    this.poller.unref();
    void this.poll();
  }

  /** Finishes the steps in flight and hands the runs back (due now) for any node to go on. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    clearInterval(this.poller);
    for (const t of this.timers) clearTimeout(t);
    await Promise.allSettled([...this.driving]);
    await this.agent.close();
  }

  /** A run is due now: take it if this node has room (else the poll finds it). */
  wake(id: string): void {
    // A failed claim leaves the run due: the poll takes it once the store answers.
    this.claim(id).catch((err: unknown) => this.failures.failed("claiming runs", err, "the poll claims them once the store answers"));
  }

  private async poll(): Promise<void> {
    if (this.polling || this.stopping || Date.now() < this.pollAfter) return;
    this.polling = true;
    try {
      while (this.active < this.o.maxActive && (await this.claim())) {
        // claimed one; look for the next
      }
      this.pollFailures = 0;
      this.failures.ok("claiming runs");
    } catch (err) {
      // Not every 500 ms against a failing store: 1 s, 2 s, 4 s, then every 5 s until it answers.
      this.pollFailures += 1;
      this.pollAfter = Date.now() + Math.min(POLL_BACKOFF_MAX_MS, POLL_MS * 2 ** this.pollFailures);
      this.failures.failed("claiming runs", err, "polls back off until the store answers");
    } finally {
      this.polling = false;
    }
  }

  private async claim(id?: string): Promise<boolean> {
    if (this.stopping || this.active >= this.o.maxActive) return false;
    const clock = this.clock();
    // The most overdue first, read in order from the sparse `due_at` index: a claim costs one row.
    const run = await this.o.runs.update(ALL_TENANTS, { ...(id && { id }), due_at: { $lte: clock.now } }, claim(randomUUID(), clock), {
      sort: { due_at: 1 },
    });
    if (!run) return false;
    this.active += 1;
    this.run(run as Claimed);
    return true;
  }

  /**
   * A new run as this node would store it already claimed (runs.logic.ts `claimedAtStart`), saving
   * the store a claim after the insert; null when the node has no room (store it due, for any node).
   * The room is held until `adopt` (stored) or `unreserve` (not stored).
   */
  reserve(run: RunDoc): Claimed | null {
    if (this.stopping || this.active >= this.o.maxActive) return null;
    this.active += 1;
    return claimedAtStart(run, randomUUID(), this.clock()) as Claimed;
  }

  unreserve(): void {
    this.active -= 1;
  }

  /** Drives a run from `reserve`, now stored. */
  adopt(run: Claimed): void {
    this.run(run);
  }

  /** Drives a run claimed under its lease; the room for it is taken already. */
  private run(run: Claimed): void {
    const driving: Promise<void> = this.drive(run)
      .then(
        () => this.failures.ok("driving runs"),
        (err: unknown) => {
          // Once per kind of failure (a full disk stops every run at once), each run at debug level.
          this.failures.failed("driving runs", err, "each run stopped falls due again when its claim runs out");
          this.o.logger.debug(`run ${run.id}: stopped by an error; it falls due again when its claim runs out`, err);
        },
      )
      .finally(() => {
        this.active -= 1;
        this.driving.delete(driving);
      });
    this.driving.add(driving);
  }

  private later(id: string, ms: number): void {
    if (ms > LOCAL_TIMER_MAX_MS || this.stopping) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake(id);
    }, ms);
    timer.unref();
    this.timers.add(timer);
  }

  private clock(): Clock {
    return { now: Date.now(), leaseMarginMs: this.leaseMarginMs };
  }

  /**
   * Stores a transition's write under the lease. Answers the run as stored while the engine keeps
   * it, or null: the write let it go, or the run is no longer this node's (cancelled meanwhile).
   */
  private async save(run: Claimed, write: RunWrite): Promise<Claimed | null> {
    const saved = await this.o.runs.update(ALL_TENANTS, { id: run.id, lease: run.lease, rev: run.rev }, updateOf(write));
    // A short wait is also kept by a local timer, not only found by the poll.
    if (write.released && write.set.due_at !== undefined) this.later(run.id, Math.max(0, write.set.due_at - Date.now()));
    if (saved) return write.released ? null : (saved as Claimed);
    // Someone else wrote: an approval or rejection keeps our claim (go on from what is stored);
    // a cancellation takes it away (stop).
    const fresh = await this.o.runs.get({ org_id: run.org_id, environment: run.environment }, run.id);
    return fresh && fresh.lease === run.lease ? (fresh as Claimed) : null;
  }

  private async publish(run: Claimed, events: OutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    // The events service stores each id once: after a crash, what was handed over already is skipped.
    const docs: PublishedEvent[] = events.map((e) => ({
      id: e.id,
      org_id: run.org_id,
      environment: run.environment,
      type: e.type,
      data: e.data,
      source: "workflows",
      created_at: new Date().toISOString(),
      origin_workflow_id: run.workflow_id,
      chain_depth: run.chain_depth,
      chain_root: run.chain_root,
    }));
    const stored = new Set(await publishEvents(this.o.broker, docs));
    for (const doc of docs) {
      if (doc.type !== "workflow.completed" || !stored.has(doc.id)) continue;
      this.o.ended?.(doc);
      if (doc.data.status === "failed") {
        const step = run.steps.find((s) => s.status === "failed");
        this.o.logger.warn(
          {
            run_id: run.id,
            workflow_id: run.workflow_id,
            step: step?.id ?? null,
            error: step?.error ?? null,
            request_id: run.request_id ?? null,
          },
          "run failed",
        );
      }
    }
  }

  /** The run stalled more than MAX_STALLS times: given up (runs.logic.ts `giveUp`), saying so in the log. */
  private async giveUp(run: Claimed): Promise<Claimed | null> {
    const { write, dropped, why } = giveUp(run, this.clock());
    if (dropped.length > 0)
      this.o.logger.error(
        `run ${run.id}: events it could not publish in ${MAX_STALLS} tries in a row are dropped: ${dropped.map((e) => `${e.type} ${e.id}`).join(", ")}`,
      );
    if (why) this.o.logger.error(`run ${run.id}: ${why}`);
    return this.save(run, write);
  }

  private async drive(claimed: Claimed): Promise<void> {
    let run: Claimed | null = (claimed.stalls ?? 0) > MAX_STALLS ? await this.giveUp(claimed) : claimed;
    while (run) {
      if (this.stopping) {
        await this.save(run, handBack(run, this.clock()));
        return;
      }
      let move = nextMove(run, this.clock());
      const names = move.kind === "call" ? secretNames(run.definition[run.cursor]) : [];
      let secrets: Record<string, string> = {};
      if (names.length > 0) {
        // Read only now, for the request about to leave: the values are never stored with the run.
        try {
          secrets = await this.o.secretValues({ org_id: run.org_id, environment: run.environment }, names);
        } catch (err) {
          if (!(err instanceof SecretUnavailable)) throw err;
          // Retrying would not create the secret: the step fails at once, saying which and why.
          run = await this.save(run, fail(run, err.message, this.clock()));
          continue;
        }
        move = nextMove(run, this.clock(), secrets);
      }
      if (move.kind === "publish") {
        await this.publish(run, run.outbox);
        run = await this.save(run, published(run, this.clock()));
      } else if (move.kind === "call") {
        const request = run.traceparent
          ? { ...move.request, headers: { ...move.request.headers, traceparent: childTraceparent(run.traceparent) } }
          : move.request;
        // Redacted: what the server sent and the error, never the engine's own fields (a secret
        // whose value is `k` turned the attempt's `ok` into another key and failed the step).
        const { output, error, ...facts } = await this.call(run, request);
        const result = { ...facts, output: redactAnswer(output, secrets), error: error === null ? null : redact(error, secrets) };
        run = await this.save(run, attempted(run, result, this.clock(), this.o.retryBaseMs));
      } else {
        run = await this.save(run, move.write);
      }
    }
  }

  /**
   * The headers a receiver checks a step's request by: `Idempotency-Key` (unless the step sets its
   * own) and `webhook-id`, both `<run id>:<step id>`, the same on every attempt and every
   * re-execution after a crash; the Standard Webhooks signature under the workflow's signing secrets.
   */
  private async signed(run: RunDoc, request: HttpRequest): Promise<Record<string, string>> {
    const id = `${run.id}:${run.definition[run.cursor].id}`;
    const workflow = await this.o.workflows.get({ org_id: run.org_id, environment: run.environment }, run.workflow_id);
    const secrets = workflow ? signingSecrets(workflow, Date.now()) : [];
    return {
      "idempotency-key": id,
      ...request.headers,
      ...(secrets.length > 0 && standardHeaders(id, request.body ?? "", secrets)),
    };
  }

  /** One attempt of an http step. */
  private async call(run: RunDoc, request: HttpRequest): Promise<Attempt> {
    const { url, method, body, timeoutMs } = request;
    const { environment } = run;
    const headers = await this.signed(run, request);
    try {
      await checkTargetUrl(url, { allowPrivate: this.o.allowPrivate, environment });
    } catch (err) {
      return { ok: false, output: null, error: `url '${url.slice(0, 200)}': ${(err as Error).message}` };
    }
    const res = await outbound(this.agent, url, { method, headers, body, timeoutMs, keep: ANSWER_LIMIT });
    if (!res.answered) return { ok: false, output: null, error: res.error, ms: res.ms, timed_out: / within \d+ ms$/.test(res.error) };
    let parsed: unknown = res.text;
    let refused: string | null = null;
    // Longer than what is read of it: not kept, the output says so (outputs.ts).
    const cut = res.bytes > ANSWER_LIMIT;
    if (!cut && res.contentType.includes("json")) {
      // Held to the limits of a request body (shared/api/json-limits.ts): an answer nested too deep or
      // holding lone surrogates (which no UTF-8 store holds as they are) is not stored, and fails
      // the attempt like a bad status, under the step's retries. Not JSON after all: kept as text.
      const checked = parseJsonWithinLimits(res.text);
      if (checked.ok) parsed = checked.value;
      else if (checked.kind !== "invalid_json") {
        parsed = null;
        refused = `the answer's JSON is ${describeJsonFault(checked)}`;
      }
    }
    const good = res.status >= 200 && res.status < 300;
    const ok = good && refused === null;
    const error = ok ? null : good ? refused : `the server answered ${res.status}${refused ? `; ${refused}` : ""}`;
    return {
      ok,
      output: cut ? cutAnswer(res.status, res.text, res.bytes) : { status_code: res.status, body: parsed },
      error,
      status_code: res.status,
      ms: res.ms,
      ...(res.retryAfter !== undefined && { retry_after: res.retryAfter }),
    };
  }
}
