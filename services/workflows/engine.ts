import { randomUUID } from "node:crypto";
import type { ServiceBroker } from "moleculer";
import type { Agent } from "undici";
import { publishEvents, type EventDoc, type PublishedEvent } from "../../shared/events";
import { FailureLog } from "../../shared/failure-log";
import { newId } from "../../shared/ids";
import { describeJsonFault, parseJsonWithinLimits } from "../../shared/json-limits";
import { checkTargetUrl } from "../../shared/net-guard";
import { outbound, outboundAgent } from "../../shared/outbound";
import { ALL_TENANTS, type Collection, type Update } from "../../shared/storage/types";
import { eventDataFault, finish, render, retryDelay, scopeOf, TERMINAL, type OutboxEvent, type RunDoc, type RunStep } from "./runs.logic";
import { boundedOutput, cutAnswer, outputsBytes, TemplateError } from "./outputs";
import type { HttpStep, Step } from "./workflows.logic";

/** Broker event: a run is due now (started, approved, cancelled); one workflows node takes it. */
export const RUN_DUE = "workflow_run.due";

/** A claim outlives the longest step it may cover (an http attempt) by this much. */
const LEASE_MARGIN_MS = 5_000;
const POLL_MS = 500;
/** After failed polls (the store failing), the next waits 1 s, 2 s, 4 s, … at most this long. */
const POLL_BACKOFF_MAX_MS = 5_000;
/**
 * Claims of a run in a row that ended before any progress of it was stored (the store failed, or
 * the node stopped mid-step) before the engine gives the run up instead of trying it again.
 */
export const MAX_STALLS = 3;
/** Waits up to this long are also kept by a local timer, not only found by the poll. */
const LOCAL_TIMER_MAX_MS = 60_000;
/** Bytes of an http step's answer kept as its output. */
const ANSWER_LIMIT = 64 * 1024;

export interface EngineOptions {
  runs: Collection<RunDoc>;
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

type Claimed = RunDoc & { lease: string };

const leaseFor = (step: Step | undefined, marginMs: number): number => (step?.type === "http" ? step.timeout_ms : 0) + marginMs;
const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Drives runs, durably: a node claims a due run with a compare-and-set lease, executes its steps one
 * by one and stores the run after each (under its lease), so a node killed mid-run leaves a run that
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
    const now = Date.now();
    const lease = randomUUID();
    // The most overdue first, read in order from the sparse `due_at` index: a claim costs one row.
    const run = await this.o.runs.update(
      ALL_TENANTS,
      { ...(id && { id }), due_at: { $lte: now } },
      { $set: { due_at: now + this.leaseMarginMs, lease }, $inc: { stalls: 1 } },
      { sort: { due_at: 1 } },
    );
    if (!run) return false;
    this.active += 1;
    const driving: Promise<void> = this.drive(run as Claimed)
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
    return true;
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

  /**
   * One write under the lease; extends the claim to cover the next step unless `release`. Answers
   * the run as stored, or null when the run is no longer this node's (cancelled meanwhile). A write
   * of `progress` (all but marking an http step running before its request) resets `stalls`.
   */
  private async save(run: Claimed, set: Partial<RunDoc>, release?: { dueAt: number | null }, progress = true): Promise<Claimed | null> {
    const now = Date.now();
    const next = set.cursor ?? run.cursor;
    const unset = {
      ...(progress && { stalls: true as const }),
      ...(release && (release.dueAt === null ? { lease: true as const, due_at: true as const } : { lease: true as const })),
    };
    const update: Update = {
      $set: {
        ...set,
        rev: run.rev + 1,
        updated_at: iso(now),
        ...(release
          ? release.dueAt !== null && { due_at: release.dueAt }
          : { due_at: now + leaseFor(run.definition[next], this.leaseMarginMs) }),
      },
      ...(Object.keys(unset).length > 0 && { $unset: unset }),
    };
    const saved = await this.o.runs.update(ALL_TENANTS, { id: run.id, lease: run.lease, rev: run.rev }, update);
    if (saved) return release ? null : (saved as Claimed);
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
    for (const doc of docs) if (doc.type === "workflow.completed" && stored.has(doc.id)) this.o.ended?.(doc);
  }

  /**
   * The run was claimed more than MAX_STALLS times in a row and no drive of it stored any progress:
   * it is not tried again. Events it could not publish (what stalled it, most likely) are dropped,
   * with an error in the log. The run fails, saying why, at the step whose event was dropped (an
   * emit step: the run did not do what it would report), or else at its current step; a run that had
   * ended otherwise, or waits for approval, keeps its state. Its workflow.completed is published as usual.
   */
  private async giveUp(run: Claimed): Promise<Claimed | null> {
    const tries = `in ${MAX_STALLS} tries in a row`;
    const dropped = run.outbox;
    if (dropped.length > 0)
      this.o.logger.error(
        `run ${run.id}: events it could not publish ${tries} are dropped: ${dropped.map((e) => `${e.type} ${e.id}`).join(", ")}`,
      );
    const lost = dropped.find((e) => e.type !== "workflow.completed" && e.type !== "approval.requested");
    const culprit = lost ? run.steps.findIndex((s) => (s.output as { event_id?: unknown } | null)?.event_id === lost.id) : -1;
    const step = run.definition[run.cursor];
    const parked = TERMINAL.has(run.status) || (step?.type === "approval" && run.steps[run.cursor]?.status === "waiting");
    if (parked && !(culprit >= 0 && run.status === "succeeded")) {
      await this.save(run, { outbox: [] }, { dueAt: null });
      return null;
    }
    const why = lost
      ? `the event ${lost.type} (${lost.id}) could not be stored ${tries}; given up`
      : `the run stopped: its progress could not be stored ${tries} (the store failed, or the node driving it stopped); given up`;
    this.o.logger.error(`run ${run.id}: ${why}`);
    const at = { ...run, cursor: culprit >= 0 ? culprit : Math.min(run.cursor, run.steps.length - 1), outbox: [] };
    return this.save(run, finish(at, "failed", iso(Date.now()), "failed", why));
  }

  private async drive(claimed: Claimed): Promise<void> {
    let run: Claimed | null = (claimed.stalls ?? 0) > MAX_STALLS ? await this.giveUp(claimed) : claimed;
    while (run) {
      if (this.stopping) {
        await this.save(run, {}, { dueAt: Date.now() });
        return;
      }
      const step = run.definition[run.cursor];
      const state = run.steps[run.cursor];
      // Ended, or parked until a person decides: nothing left for the engine but the outbox.
      const parked = TERMINAL.has(run.status) || (step?.type === "approval" && state.status === "waiting");
      if (run.outbox.length > 0) {
        await this.publish(run, run.outbox);
        run = await this.save(run, { outbox: [] }, parked ? { dueAt: null } : undefined);
        continue;
      }
      if (parked) {
        await this.save(run, {}, { dueAt: null });
        return;
      }
      const current = run;
      try {
        run = await this.advance(current, step, state, Date.now());
      } catch (err) {
        // A template that cannot be filled (it reads a truncated output): the step fails, for good.
        if (!(err instanceof TemplateError)) throw err;
        run = await this.save(current, finish(current, "failed", iso(Date.now()), "failed", err.message));
      }
    }
  }

  /** The change, and the run's end with it when it moves past the last step. */
  private ending(run: Claimed, set: Partial<RunDoc>, at: string): Partial<RunDoc> {
    if (set.cursor === undefined || set.cursor < run.definition.length) return set;
    const next = { ...run, ...set } as RunDoc;
    return { ...set, ...finish(next, "succeeded", at) };
  }

  /** Takes the current step one move further; answers the run to go on with, or null. */
  private async advance(run: Claimed, step: Step | undefined, state: RunStep, now: number): Promise<Claimed | null> {
    if (!step) return this.save(run, finish(run, "succeeded", iso(now)));
    const at = iso(now);
    const steps = [...run.steps];
    const put = (patch: Partial<RunStep>) => {
      steps[run.cursor] = { ...state, ...patch };
      return steps;
    };
    switch (step.type) {
      case "delay": {
        if (state.status !== "waiting") {
          const dueAt = now + step.duration_ms;
          await this.save(run, { status: "waiting", steps: put({ status: "waiting", started_at: at }) }, { dueAt });
          this.later(run.id, step.duration_ms);
          return null;
        }
        return this.save(
          run,
          this.ending(
            run,
            {
              status: "running",
              cursor: run.cursor + 1,
              steps: put({ status: "succeeded", output: { waited_ms: step.duration_ms }, finished_at: at }),
            },
            at,
          ),
        );
      }
      case "approval": {
        const message = step.message === null ? null : render(step.message, scopeOf(run));
        const event: OutboxEvent = {
          id: newId("evt"),
          type: "approval.requested",
          data: { workflow_id: run.workflow_id, run_id: run.id, step_id: step.id, message },
        };
        const fault = eventDataFault(event.data);
        if (fault) return this.save(run, finish({ ...run, steps: put({}) }, "failed", at, "failed", `approval.requested: ${fault}`));
        return this.save(run, { status: "waiting", steps: put({ status: "waiting", started_at: at }), outbox: [...run.outbox, event] });
      }
      case "emit": {
        const data = render(step.data, scopeOf(run)) as Record<string, unknown>;
        // A template may have put a deep value into the data: it must be what POST /events takes.
        const fault = eventDataFault(data);
        if (fault) return this.save(run, finish({ ...run, steps: put({ attempts: 1 }) }, "failed", at, "failed", fault));
        const event: OutboxEvent = { id: newId("evt"), type: step.event_type, data };
        const set = {
          status: "running" as const,
          cursor: run.cursor + 1,
          steps: put({ status: "succeeded", output: { event_id: event.id }, started_at: at, finished_at: at, attempts: 1 }),
          outbox: [...run.outbox, event],
        };
        return this.save(run, this.ending(run, set, at));
      }
      case "http": {
        if (run.status !== "running" || state.status !== "running") {
          // Shown as running before the request leaves (a crash then repeats the attempt). Not
          // progress: a request whose answer is never stored counts towards MAX_STALLS.
          return this.save(
            run,
            { status: "running", steps: put({ status: "running", started_at: state.started_at ?? at }) },
            undefined,
            false,
          );
        }
        const result = await this.call(step, run);
        // Within the step's and the run's bounds on stored outputs (see outputs.ts).
        result.output = boundedOutput(result.output, outputsBytes(run.steps, run.cursor));
        const attempts = state.attempts + 1;
        const done = iso(Date.now());
        if (result.ok) {
          return this.save(
            run,
            this.ending(
              run,
              {
                cursor: run.cursor + 1,
                steps: put({ status: "succeeded", output: result.output, error: null, attempts, finished_at: done }),
              },
              done,
            ),
          );
        }
        if (attempts <= step.retries) {
          const wait = retryDelay(this.o.retryBaseMs, attempts);
          await this.save(run, { steps: put({ output: result.output, error: result.error, attempts }) }, { dueAt: Date.now() + wait });
          this.later(run.id, wait);
          return null;
        }
        const failed = { ...run, steps: put({ output: result.output, attempts }) };
        return this.save(run, finish(failed, "failed", done, "failed", result.error ?? "failed"));
      }
    }
  }

  /** One attempt of an http step, its fields filled from the run's input and earlier outputs. */
  private async call(step: HttpStep, run: RunDoc): Promise<{ ok: boolean; output: unknown; error: string | null }> {
    const scope = scopeOf(run);
    const url = String(render(step.url, scope));
    try {
      await checkTargetUrl(url, { allowPrivate: this.o.allowPrivate, environment: run.environment });
    } catch (err) {
      return { ok: false, output: null, error: `url '${url.slice(0, 200)}': ${(err as Error).message}` };
    }
    const headers = render(step.headers, scope) as Record<string, string>;
    const rendered = step.body === null ? undefined : render(step.body, scope);
    const body =
      rendered === undefined || rendered === null ? undefined : typeof rendered === "string" ? rendered : JSON.stringify(rendered);
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
    if (body !== undefined && !lower["content-type"])
      lower["content-type"] = typeof rendered === "string" ? "text/plain" : "application/json";
    lower["user-agent"] ??= "wfp-workflows/1";
    const res = await outbound(this.agent, url, {
      method: step.method,
      headers: lower,
      body,
      timeoutMs: step.timeout_ms,
      keep: ANSWER_LIMIT,
    });
    if (!res.answered) return { ok: false, output: null, error: res.error };
    let parsed: unknown = res.text;
    let refused: string | null = null;
    // Longer than what is read of it: not kept, the output says so (outputs.ts).
    const cut = res.bytes > ANSWER_LIMIT;
    if (!cut && res.contentType.includes("json")) {
      // Held to the limits of a request body (shared/json-limits.ts): an answer nested too deep or
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
    return { ok, output: cut ? cutAnswer(res.status, res.text, res.bytes) : { status_code: res.status, body: parsed }, error };
  }
}
