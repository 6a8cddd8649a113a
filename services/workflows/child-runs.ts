import { isDuplicate } from "../../shared/errors";
import { isId } from "../../shared/ids";
import type { Tenant } from "../../shared/storage/types";
import type { RunWorkflowStep } from "../../shared/api/wire";
import {
  childDeferred,
  childInputFault,
  childKey,
  childOf,
  childRefused,
  childStarted,
  descendantsBudgetId,
  mayHaveChildren,
  nestingFault,
  pastTimeout,
  childTimedOut,
} from "./child-runs.logic";
import { FanOutRuns } from "./fan-out";
import type { Budget, ChildRunsOptions } from "./child-runs.options";
import { TemplateError } from "./outputs";
import { cancel } from "./run-decisions.logic";
import type { RunDoc } from "./run-doc";
import { TERMINAL, updateOf, type Clock, type RunWrite } from "./run-write.logic";
import { render, scopeOf } from "./templates";

const tenantOf = (run: RunDoc): Required<Tenant> => ({ org_id: run.org_id, environment: run.environment });
const UNFINISHED = ["queued", "running", "waiting"];
/** Children of one run cancelled per read, and reads before a parent's end is tried again later. */
const CANCEL_BATCH = 100;
const CANCEL_ROUNDS = 50;
const MINUTE_MS = 60_000;

/**
 * The engine's side of child runs: starting a run_workflow step's child and following it, and what
 * a run's end does to its family. Each step is safe to repeat after a crash: a child is stored once
 * under its key (child-runs.logic.ts), a parent is made due again by each of its child's ends, and
 * children are cancelled by compare-and-set.
 */
export class ChildRuns {
  private readonly fanOut: FanOutRuns;

  constructor(private readonly o: ChildRunsOptions) {
    this.fanOut = new FanOutRuns(o, this);
  }

  /** The run's current (run_workflow) step, one move further: its child started, or followed. */
  async step(run: RunDoc, c: Clock): Promise<RunWrite> {
    const tenant = tenantOf(run);
    if (run.definition[run.cursor].type !== "run_workflow") return this.fanOut.step(run, c);
    const state = run.steps[run.cursor];
    if (state.status === "waiting") {
      const id = (state.output as { run_id?: unknown } | null)?.run_id;
      const child = typeof id === "string" ? await this.o.runs.get(tenant, id) : null;
      if (!child) return childRefused(run, `the child run ${String(id)} is not found (pruned after EVENT_RETENTION_DAYS?)`, c);
      if (pastTimeout(run, c) && child.status !== "succeeded" && child.status !== "failed") {
        return childTimedOut(run, await this.cancelled(child), c);
      }
      return childStarted(run, child, c);
    }
    const step = run.definition[run.cursor] as RunWorkflowStep;
    // A drive cut after the child was stored finds it here.
    const found = await this.o.runs.findOne(tenant, { trigger_key: childKey(run, step.id, 0) });
    if (found) return childStarted(run, found, c);
    const nesting = nestingFault(run);
    if (nesting) return childRefused(run, nesting, c, "limit_reached");
    let target: unknown;
    let input: unknown;
    try {
      target = render(step.workflow_id, scopeOf(run));
      input = render(step.input, scopeOf(run));
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      return childRefused(run, err.message, c, "template_error");
    }
    const inputFault = childInputFault(input);
    if (inputFault) return childRefused(run, inputFault, c);
    if (!isId("wf", target))
      return childRefused(run, `workflow_id gave ${JSON.stringify(target)}, which is not a workflow id (wf_…)`, c, "workflow_not_found");
    const workflow = await this.o.workflows.get(tenant, target);
    if (!workflow) return childRefused(run, `no workflow '${target}' in this environment`, c, "workflow_not_found");
    if (workflow.status !== "active") return childRefused(run, `the workflow '${target}' is inactive`, c);
    const child = childOf(workflow, run, input as Record<string, unknown>, c.now);
    const root = child.root_run_id as string;
    const descendants = { id: descendantsBudgetId(root), limit: this.o.descendantsMax, expiresAt: c.now + this.o.budgetTtlMs };
    const budgetNow = this.o.now();
    const starts = this.o.startsBudget(tenant, budgetNow);
    let spent: Budget | null;
    try {
      spent = await this.o.startCounted(tenant, [descendants, starts], child);
    } catch (err) {
      if (!isDuplicate(err)) throw err;
      // Another drive of this run (its claim lapsed meanwhile) stored it first.
      const stored = await this.o.runs.findOne(tenant, { trigger_key: child.trigger_key as string });
      if (!stored) throw err;
      return childStarted(run, stored, c);
    }
    if (spent === descendants)
      return childRefused(
        run,
        `limit reached: at most ${this.o.descendantsMax} runs may descend from one root run (RUN_DESCENDANTS_MAX; root ${root})`,
        c,
        "limit_reached",
      );
    // The minute's starts are spent: again when the budget's next minute begins.
    if (spent) return childDeferred(run, c, c.now + Math.max(0, MINUTE_MS - (budgetNow % MINUTE_MS)));
    this.o.wake(child.id, tenant);
    // Cancelled while the child was being stored: its end may have looked for children before this one was there.
    const parent = await this.o.runs.get(tenant, run.id);
    if (parent && TERMINAL.has(parent.status) && parent.status !== "succeeded") await this.cancelChildren(parent);
    return childStarted(run, child, c);
  }

  /**
   * `run` has ended (its workflow.completed is being published): a parent waiting on it is made
   * due (its claim taken, its revision moved, so a drive of it that read the child running stores
   * nothing), and its own unfinished children are cancelled when it failed or was cancelled.
   * Repeated until the outbox is emptied, so a crash between the two repeats both.
   */
  async ended(run: RunDoc): Promise<void> {
    const tenant = tenantOf(run);
    if (run.parent && run.wakes_parent_at !== undefined) {
      const woken = await this.o.runs.update(
        tenant,
        { id: run.parent.run_id, cursor: run.wakes_parent_at, status: { $in: UNFINISHED } },
        // A child's end is progress of its parent: a map's parent, woken by each of its children, is not given up as stalled.
        { $set: { due_at: Date.now(), stalls: 0 }, $inc: { rev: 1 }, $unset: { lease: true } },
      );
      if (woken) this.o.wake(woken.id, tenant);
    }
    if (mayHaveChildren(run)) await this.cancelChildren(run);
  }

  /** Cancels `child` by compare-and-set (nothing when it changed meanwhile: the caller reads again) and wakes it to publish its end. */
  private async cancelOne(child: RunDoc): Promise<boolean> {
    const write = updateOf(cancel(child, Date.now(), undefined, "parent_ended"));
    const done = await this.o.runs.update(tenantOf(child), { id: child.id, rev: child.rev }, write);
    if (done) this.o.wake(child.id, tenantOf(child));
    return done !== null;
  }

  /** `child`, cancelled unless it had ended: tried again while it changes under the engine that drives it. */
  private async cancelled(child: RunDoc): Promise<RunDoc> {
    let fresh: RunDoc | null = child;
    for (let tries = 0; fresh && tries < CANCEL_ROUNDS; tries += 1) {
      if (TERMINAL.has(fresh.status) || (await this.cancelOne(fresh))) return fresh;
      fresh = await this.o.runs.get(tenantOf(child), child.id);
    }
    // The parent's drive stops here and is tried again when its claim runs out.
    throw new Error(`run ${child.id}: kept changing while it was being cancelled`);
  }

  /** Cancels `run`'s children (of its step `stepId`, when given) that have not ended, each by compare-and-set; each cancelled child's end cancels its own. */
  async cancelChildren(run: RunDoc, stepId?: string): Promise<void> {
    const tenant = tenantOf(run);
    for (let round = 0; round < CANCEL_ROUNDS; round += 1) {
      const batch = await this.o.runs.find(
        tenant,
        { "parent.run_id": run.id, ...(stepId !== undefined && { "parent.step_id": stepId }), status: { $in: UNFINISHED } },
        { sort: { id: 1 }, limit: CANCEL_BATCH },
      );
      if (batch.length === 0) return;
      for (const child of batch) await this.cancelOne(child);
    }
    // The children kept changing: the parent's end is tried again when its claim runs out.
    throw new Error(`run ${run.id}: its children could not all be cancelled yet`);
  }
}
