import { isDuplicate } from "../../shared/errors";
import { ALL_TENANTS, type AtomicWrite, type Collection, type Store, type Tenant } from "../../shared/storage/types";
import { debounceReleased, debounced, windowOf, type QueuedReason } from "./flow-control.logic";
import type { RunDoc } from "./run-doc";
import type { BudgetDoc } from "./workflows.store";

/** A key whose oldest held run cannot go yet is looked at again by a node's sweep this long after. */
export const RECHECK_MS = 5_000;
const SWEEP_MS = 500;
/** Held runs whose time to be looked at has come, read at once per sweep (from the sparse `release_at` index). */
const SWEEP_ROWS = 32;
/** Runs let go by one pump at most: a key with more room is pumped again by the next end or sweep. */
const PUMP_MAX = 50;
/** A gate unused this long is pruned with the budgets (a new one starts at 0: its count is a revision, not a tally). */
const GATE_TTL_MS = 24 * 60 * 60 * 1000;
const UNFINISHED = ["queued", "running", "waiting"];
const MINUTE_MS = 60_000;

export interface FlowGateOptions {
  runs: Collection<RunDoc>;
  budgets: Collection<BudgetDoc>;
  atomically: Store["atomically"];
  /** The RUN_STARTS_PER_MINUTE budget of the minute `now` falls in (run-starts.mixin.ts). */
  startsBudget: (tenant: Scope, now: number) => { id: string; expiresAt: number };
  /** The platform's clock, that the start budgets' minutes follow (a test's own in tests). */
  clock: () => number;
  /** A run let go is due now: wake the engines (RUN_DUE). */
  due: (run: RunDoc) => void;
  logger: { warn: (...args: unknown[]) => void; debug: (...args: unknown[]) => void };
}

type Scope = Required<Tenant>;

/**
 * Lets held runs (flow-control.logic.ts) go, oldest first per key, as their key has room, on any
 * node. The room of a concurrency key is derived, never tallied: the runs of the key that were let
 * go and have not ended, counted through their index (at most `limit` entries read). Two nodes
 * letting go runs of one key at once are ordered by the key's gate, a row whose revision every
 * letting-go write moves under compare-and-set together with the run: the loser reads the count
 * again. A run's end is never written here, so a node killed anywhere leaves nothing to drift.
 *
 * A pump runs when a held run is stored and when a run of a key ends. The oldest held run of a key
 * that cannot go carries `release_at` (the next window of a throttle, else RECHECK_MS), and every
 * write that lets one go marks the next, so a node's sweep finds every key with held runs even when
 * the pump after a run's end was lost with its node.
 */
export class FlowGate {
  private sweeper: NodeJS.Timeout | undefined;
  private sweeping = false;

  constructor(private readonly o: FlowGateOptions) {}

  start(): void {
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /**
   * A start of a debounced key (`run`, not stored) joins the key's pending run, if there is one:
   * that run takes the start's input and its release moves (flow-control.logic.ts `debounced`), and
   * `run` takes its id. Answers whether it joined.
   */
  async joinBurst(tenant: Scope, run: RunDoc): Promise<boolean> {
    for (let tries = 0; tries < 3; tries += 1) {
      const pending = await this.o.runs.findOne(tenant, { debounce_key: run.debounce_key ?? "" });
      if (!pending) return false;
      if (pending.status !== "queued") {
        // Cancelled while pending: its key is free for a new burst.
        await this.o.runs.update(tenant, { id: pending.id, debounce_key: pending.debounce_key ?? "" }, { $unset: { debounce_key: true } });
        return false;
      }
      const period = run.flow?.debounce_ms ?? 0;
      const joined = await this.o.runs.update(
        tenant,
        { id: pending.id, rev: pending.rev, debounce_key: pending.debounce_key ?? "" },
        debounced(pending, run.input, period, Date.now()),
      );
      if (joined) {
        run.id = joined.id;
        return true;
      }
    }
    return false;
  }

  /** Lets the held runs of `flowKey` go while it has room; answers false when it failed (the sweep goes on). */
  async pump(tenant: Scope, flowKey: string): Promise<boolean> {
    try {
      for (let i = 0; i < PUMP_MAX; i += 1) if (!(await this.letOneGo(tenant, flowKey))) return true;
      return true;
    } catch (err) {
      this.o.logger.debug(`flow key ${flowKey}: letting held runs go failed; the sweep goes on`, err);
      return false;
    }
  }

  /** Answers whether to go on: a run went (or another node's write came between). */
  private async letOneGo(tenant: Scope, flowKey: string): Promise<boolean> {
    const now = Date.now();
    const [head, next] = await this.o.runs.find(
      tenant,
      { flow_key: flowKey, status: "queued", held_at: { $exists: true } },
      { sort: { held_at: 1 }, limit: 2 },
    );
    if (!head) return false;
    const flow = head.flow ?? {};
    const gateId = `gate/${flowKey}`;
    const gate = (await this.o.budgets.get(tenant, gateId)) ?? (await this.openGate(tenant, gateId, now));
    if (flow.concurrency !== undefined) {
      const unfinished = await this.o.runs.count(
        tenant,
        // Neither held nor pending a debounce: let go.
        { flow_key: flowKey, status: { $in: UNFINISHED }, held_at: { $exists: false }, debounce_key: { $exists: false } },
        { limit: flow.concurrency },
      );
      if (unfinished >= flow.concurrency) return this.later(tenant, head, now + RECHECK_MS, "concurrency");
    }
    const writes: AtomicWrite[] = [
      {
        op: "update",
        collection: this.o.budgets,
        scope: tenant,
        filter: { id: gateId, runs: gate.runs },
        update: { $inc: { runs: 1 }, $set: { expires_at: new Date(now + GATE_TTL_MS).toISOString() } },
      },
    ];
    // The windows the run must count in: its throttle's, and the minute's when it came over RUN_STARTS_PER_MINUTE.
    const windows: { id: string; limit: number; end: number; reason: QueuedReason }[] = [];
    if (flow.throttle) {
      const window = windowOf(flow.throttle.period_ms, now);
      const id = `throttle/${flow.throttle.key ?? flowKey}/${window.start}`;
      windows.push({ id, limit: flow.throttle.limit, end: window.end, reason: "throttle" });
      await this.open(tenant, id, window.end + RECHECK_MS);
    }
    if (flow.starts !== undefined) {
      const minuteNow = this.o.clock();
      const budget = this.o.startsBudget(tenant, minuteNow);
      windows.push({ id: budget.id, limit: flow.starts, end: windowOf(MINUTE_MS, minuteNow).end, reason: "start_budget" });
      await this.open(tenant, budget.id, budget.expiresAt);
    }
    for (const window of windows)
      writes.push({
        op: "update",
        collection: this.o.budgets,
        scope: tenant,
        filter: { id: window.id, runs: { $lt: window.limit } },
        update: { $inc: { runs: 1 } },
      });
    writes.push({
      op: "update",
      collection: this.o.runs,
      scope: tenant,
      filter: { id: head.id, status: "queued", rev: head.rev },
      update: {
        $set: { due_at: now, updated_at: new Date(now).toISOString() },
        $unset: { held_at: true, release_at: true, queued_reason: true },
        $inc: { rev: 1 },
      },
    });
    // The next one becomes the oldest held: marked for the sweep in the same write.
    if (next)
      writes.push({ op: "update", collection: this.o.runs, scope: tenant, filter: { id: next.id }, update: { $set: { release_at: now } } });
    const written = await this.o.atomically(writes);
    if (written) {
      this.o.due(written[written.length - (next ? 2 : 1)] as RunDoc);
      return true;
    }
    for (const window of windows) {
      const spent = await this.o.budgets.get(tenant, window.id);
      if (spent && spent.runs >= window.limit) return this.later(tenant, head, window.end, window.reason);
    }
    return true;
  }

  /** The oldest held run cannot go before `at`: the sweep looks at its key then, and the run says why it waits. */
  private async later(tenant: Scope, head: RunDoc, at: number, reason: QueuedReason): Promise<false> {
    if (head.release_at !== at || head.queued_reason !== reason)
      await this.o.runs.update(tenant, { id: head.id, status: "queued" }, { $set: { release_at: at, queued_reason: reason } });
    return false;
  }

  /** A pending debounced run whose burst ended: held behind its key's limits, or due now. */
  private async release(tenant: Scope, id: string): Promise<void> {
    const run = await this.o.runs.get(tenant, id);
    if (!run?.debounce_key) return;
    if (run.status !== "queued") {
      await this.o.runs.update(tenant, { id, debounce_key: run.debounce_key }, { $unset: { debounce_key: true, release_at: true } });
      return;
    }
    const now = Date.now();
    if ((run.release_at ?? 0) > now) return;
    const released = await this.o.runs.update(tenant, { id, rev: run.rev, debounce_key: run.debounce_key }, debounceReleased(run, now));
    if (released && !released.flow_key) this.o.due(released);
  }

  private async openGate(tenant: Scope, id: string, now: number): Promise<BudgetDoc> {
    await this.open(tenant, id, now + GATE_TTL_MS);
    const gate = await this.o.budgets.get(tenant, id);
    if (!gate) throw new Error(`flow gate ${id} could not be opened`);
    return gate;
  }

  private async open(tenant: Scope, id: string, expiresAt: number): Promise<void> {
    try {
      await this.o.budgets.insert({
        id,
        org_id: tenant.org_id,
        environment: tenant.environment,
        runs: 0,
        expires_at: new Date(expiresAt).toISOString(),
      });
    } catch (err) {
      if (!isDuplicate(err)) throw err;
    }
  }

  /**
   * Pumps the keys of the held runs whose time to be looked at has come, then clears the mark of
   * those the pump did not mark again (runs that went, ended, or are not the oldest of their key).
   */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const now = Date.now();
      const rows = await this.o.runs.pluck(
        ALL_TENANTS,
        { release_at: { $lte: now } },
        ["id", "org_id", "environment", "flow_key", "debounce_key"],
        { sort: { release_at: 1 }, limit: SWEEP_ROWS },
      );
      for (const row of rows)
        if (row.debounce_key) await this.release({ org_id: row.org_id, environment: row.environment as Scope["environment"] }, row.id);
      const keyOf = (row: (typeof rows)[number]) => `${row.org_id}/${row.environment}/${row.flow_key}`;
      const pumped = new Map<string, boolean>();
      for (const row of rows) {
        const key = keyOf(row);
        const tenant = { org_id: row.org_id, environment: row.environment as Scope["environment"] };
        if (!pumped.has(key)) pumped.set(key, row.flow_key ? await this.pump(tenant, row.flow_key) : true);
      }
      // A key whose pump failed keeps its marks: the next sweep tries it again.
      for (const row of rows)
        if (pumped.get(keyOf(row)))
          await this.o.runs.update(row as Scope, { id: row.id, release_at: { $lte: now } }, { $unset: { release_at: true } });
    } catch (err) {
      this.o.logger.debug("sweeping held runs failed; the next sweep goes on", err);
    } finally {
      this.sweeping = false;
    }
  }
}
