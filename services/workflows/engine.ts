import { randomUUID } from "node:crypto";
import { FailureLog } from "../../shared/runtime/failure-log";
import { ALL_TENANTS, type Collection, type ReadView, type Tenant } from "../../shared/storage/types";
import type { ChildRuns } from "./child-runs";
import { HttpAttempts } from "./http-attempts";
import { redact, redactAnswer } from "./outputs";
import { publishOutbox, type OutboxTarget } from "./run-outbox";
import { attempted } from "./http-step.logic";
import type { RunDoc } from "./run-doc";
import { claim, claimedAtStart, giveUp, handBack, MAX_STALLS, nextMove, published } from "./run-moves.logic";
import { TERMINAL, updateOf, type Clock, type RunWrite } from "./run-write.logic";
import { fail } from "./runs.logic";
import { SecretUnavailable, secretNames } from "./secrets.logic";
import { sharesOf, TenantSlots, type Shares } from "./tenant-slots";
import { DueTenants } from "./due-tenants";
import type { WorkflowDoc } from "./workflows.logic";
import type { Registration } from "./wait-records";
import { refused } from "./wait-moves.logic";

/** Broker event: a run is due now (started, approved, cancelled); one workflows node takes it. */
export const RUN_DUE = "workflow_run.due";

/** A claim outlives the longest step it may cover (an http attempt) by this much. */
const LEASE_MARGIN_MS = 5_000;
const POLL_MS = 500;
/** After failed polls (the store failing), the next waits 1 s, 2 s, 4 s, … at most this long. */
const POLL_BACKOFF_MAX_MS = 5_000;
/** Waits up to this long are also kept by a local timer, not only found by the poll. */
const LOCAL_TIMER_MAX_MS = 60_000;
/** Reads for tenants with work in one poll, at most: the turns then go on at the next. */
const DISCOVERIES_PER_POLL = 3;

export interface EngineOptions extends OutboxTarget {
  runs: Collection<RunDoc>;
  /** Read for the signing secrets of a run's workflow, at each http attempt (a rotation applies at once). */
  workflows: ReadView<WorkflowDoc>;
  /** The values of the secrets a step uses (secrets.service.ts); SecretUnavailable when one cannot be had. */
  secretValues: (tenant: Required<Tenant>, names: readonly string[]) => Promise<Record<string, string>>;
  allowPrivate: boolean;
  retryBaseMs: number;
  /** Runs this node drives at once, shared between tenants (tenant-slots.ts). */
  maxActive: number;
  /** What one organization and one environment may hold of them (default: tenant-slots.ts `sharesOf`). */
  shares?: Shares;
  /**
   * Stores the registrations of a run about to wait for an event or arm its cancel_on
   * (waits.mixin.ts); answers null, or why they are refused (a limit, named). Absent: refused.
   */
  register?: (run: RunDoc, registrations: Registration[]) => Promise<string | null>;
  /** How long a claim outlives the step it covers (default 5 s; tests shorten it). */
  leaseMarginMs?: number;
  /** Starts and follows child runs, and carries a run's end to its parent and children (child-runs.ts). */
  children?: ChildRuns;
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
  private readonly slots: TenantSlots;
  private readonly dueTenants: DueTenants;
  private stopping = false;
  private poller: NodeJS.Timeout | undefined;
  private polling = false;
  /** A slot freed or a tenant was woken while a poll ran: it goes round once more. */
  private repoll = false;
  private readonly driving = new Set<Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly http: HttpAttempts;
  private readonly leaseMarginMs: number;
  private readonly failures: FailureLog;
  /** Polls in a row that failed, and when the next may run. */
  private pollFailures = 0;
  private pollAfter = 0;

  constructor(private readonly o: EngineOptions) {
    this.http = new HttpAttempts(o.workflows, o.allowPrivate);
    this.leaseMarginMs = o.leaseMarginMs ?? LEASE_MARGIN_MS;
    this.failures = new FailureLog(o.logger);
    this.slots = new TenantSlots(o.shares ?? sharesOf(o.maxActive));
    this.dueTenants = new DueTenants(o.runs, this.slots);
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
    await this.http.close();
  }

  /**
   * A run of `tenant` is due now: take it if the tenant has room on this node; otherwise the tenant
   * takes its turn when a slot frees (the poll finds it too).
   */
  wake(id: string, tenant?: Required<Tenant>): void {
    if (this.stopping) return;
    if (tenant && !this.slots.room(tenant)) {
      this.slots.waiting(tenant);
      return;
    }
    // A failed claim leaves the run due: the poll takes it once the store answers.
    this.claim(id, tenant).catch((err: unknown) =>
      this.failures.failed("claiming runs", err, "the poll claims them once the store answers"),
    );
  }

  /**
   * Fills free slots: tenants known to have due runs take turns, one claim each; when none of them
   * can take a slot, the due index is read for other tenants with work.
   */
  private async poll(): Promise<void> {
    if (this.stopping || Date.now() < this.pollAfter) return;
    if (this.polling) {
      this.repoll = true;
      return;
    }
    this.polling = true;
    try {
      do {
        this.repoll = false;
        let discoveries = 0;
        while (!this.stopping && this.slots.active < this.o.maxActive) {
          const tenant = this.slots.next();
          if (tenant) {
            if (!(await this.claimOf(tenant))) this.slots.rested(tenant);
          } else if (discoveries >= DISCOVERIES_PER_POLL || !(await this.dueTenants.discover(Date.now()))) break;
          else discoveries += 1;
        }
      } while (this.repoll && !this.stopping);
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

  /**
   * Claims the run `id` if it is due. With its tenant known, the slot is taken before the claim is
   * sent, so wake-ups arriving together never take more than the tenant's share.
   */
  private async claim(id: string, tenant?: Required<Tenant>): Promise<boolean> {
    const clock = this.clock();
    const filter = { id, due_at: { $lte: clock.now } };
    if (tenant) return this.claimHolding(tenant, () => this.o.runs.update(ALL_TENANTS, filter, claim(randomUUID(), clock)));
    if (this.slots.active >= this.o.maxActive) return false;
    const run = await this.o.runs.update(ALL_TENANTS, filter, claim(randomUUID(), clock));
    if (!run) return false;
    this.slots.take(run as Required<Tenant>);
    this.run(run as Claimed);
    return true;
  }

  /** Claims `tenant`'s most overdue run, read from the tenant's `due_at` index: one row. */
  private claimOf(tenant: Required<Tenant>): Promise<boolean> {
    const clock = this.clock();
    return this.claimHolding(tenant, () =>
      this.o.runs.update(tenant, { due_at: { $lte: clock.now } }, claim(randomUUID(), clock), { sort: { due_at: 1 } }),
    );
  }

  /** Takes a slot of `tenant` for the claim `send` makes, and gives it back when it claims nothing. */
  private async claimHolding(tenant: Required<Tenant>, send: () => Promise<RunDoc | null>): Promise<boolean> {
    if (this.stopping) return false;
    this.slots.take(tenant);
    let run: RunDoc | null = null;
    try {
      run = await send();
    } finally {
      if (!run) this.slots.give(tenant);
    }
    if (!run) return false;
    this.run(run as Claimed);
    return true;
  }

  /**
   * A new run as this node would store it already claimed (run-moves.logic.ts `claimedAtStart`), saving
   * the store a claim after the insert; null when the node has no room (store it due, for any node).
   * The room is held until `adopt` (stored) or `unreserve` (not stored).
   */
  reserve(run: RunDoc): Claimed | null {
    if (this.stopping || !this.slots.room(run as Required<Tenant>)) return null;
    this.slots.take(run as Required<Tenant>);
    return claimedAtStart(run, randomUUID(), this.clock()) as Claimed;
  }

  unreserve(run: RunDoc): void {
    this.slots.give(run as Required<Tenant>);
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
        this.slots.give(run as Required<Tenant>);
        this.driving.delete(driving);
        // The slot goes to the next tenant in turn.
        if (this.slots.queued > 0) void this.poll();
      });
    this.driving.add(driving);
  }

  private later(run: RunDoc, ms: number): void {
    if (ms > LOCAL_TIMER_MAX_MS || this.stopping) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake(run.id, run as Required<Tenant>);
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
    if (write.released && write.set.due_at !== undefined) this.later(run, Math.max(0, write.set.due_at - Date.now()));
    if (saved) return write.released ? null : (saved as Claimed);
    // Someone else wrote: an approval or rejection keeps our claim (go on from what is stored);
    // a cancellation takes it away (stop).
    const fresh = await this.o.runs.get({ org_id: run.org_id, environment: run.environment }, run.id);
    return fresh && fresh.lease === run.lease ? (fresh as Claimed) : null;
  }

  /** The run stalled more than MAX_STALLS times: given up (run-moves.logic.ts `giveUp`), saying so in the log. */
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
        await publishOutbox(this.o, run, run.outbox);
        // Before the outbox is emptied: a crash in between carries the end to the run's family again.
        if (TERMINAL.has(run.status)) await this.o.children?.ended(run);
        run = await this.save(run, published(run, this.clock()));
      } else if (move.kind === "call") {
        // Redacted: what the server sent and the error, never the engine's own fields (a value such
        // as `k` would otherwise rename the attempt's `ok` key).
        const { output, error, ...facts } = await this.http.attempt(run, move.request);
        const result = { ...facts, output: redactAnswer(output, secrets), error: error === null ? null : redact(error, secrets) };
        run = await this.save(run, attempted(run, result, this.clock(), this.o.retryBaseMs));
      } else if (move.kind === "register") {
        // Registered before the write that shows the run waiting: an event stored after that finds it.
        const why = this.o.register ? await this.o.register(run, move.registrations) : "this engine takes no waits";
        run = await this.save(run, why === null ? move.write : refused(run, move, why, this.clock()));
      } else if (move.kind === "child") {
        const clock = this.clock();
        run = await this.save(
          run,
          this.o.children ? await this.o.children.step(run, clock) : fail(run, "child runs are not available here", clock),
        );
      } else {
        run = await this.save(run, move.write);
      }
    }
  }
}
