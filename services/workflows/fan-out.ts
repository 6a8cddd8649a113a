import { isDuplicate } from "../../shared/errors";
import { isId } from "../../shared/ids";
import type { Tenant } from "../../shared/storage/types";
import type { ChildRunsOptions } from "./child-runs.options";
import { childInputFault, descendantsBudgetId, nestingFault } from "./child-runs.logic";
import {
  fanChild,
  fanDeferred,
  fanFailed,
  fanOutOf,
  fanSucceeded,
  fanWaiting,
  mapOutput,
  parallelOutput,
  pastStored,
  branchesFailed,
  branchesOf,
  type ChildResult,
  type FanOut,
  type FanOutProgress,
  type FanOutStep,
} from "./fan-out.logic";
import { TemplateError } from "./outputs";
import type { RunDoc } from "./run-doc";
import { TERMINAL, type Clock, type RunWrite } from "./run-write.logic";
import { render, scopeOf } from "./templates";
import type { WorkflowDoc } from "./workflows.logic";

const tenantOf = (run: RunDoc): Required<Tenant> => ({ org_id: run.org_id, environment: run.environment });
const UNFINISHED = ["queued", "running", "waiting"];
const ENDED_BADLY = ["failed", "cancelled"];
const MINUTE_MS = 60_000;

/** Cancels a run's unfinished children of one step (child-runs.ts). */
interface Canceller {
  cancelChildren(run: RunDoc, stepId?: string): Promise<void>;
}

/** What starting one child came to: stored now, found stored by another drive, or the step must stop (`refused`) or wait (`deferredTo`). */
type Start = { stored: true } | { found: true } | { refused: string; code: string } | { deferredTo: number };

/**
 * The engine's side of `map` and `parallel` steps (fan-out.logic.ts). Each drive of the step counts
 * its children through the `parent.run_id` index (unfinished ones; failed ones of this attempt),
 * starts the next ones up to the step's concurrency, and parks the run; each child's end makes the
 * parent due again (child-runs.ts `ended`), taking the claim of a drive still running: drives
 * overlap. Each child is stored once under its key, so none starts twice; a drive that finds one
 * stored stops when its claim was taken, else goes on past the stored ones (decision 0186).
 */
export class FanOutRuns {
  constructor(
    private readonly o: ChildRunsOptions,
    private readonly family: Canceller,
  ) {}

  async step(run: RunDoc, c: Clock): Promise<RunWrite> {
    const step = run.definition[run.cursor] as FanOutStep;
    let plan: FanOut | string;
    try {
      plan = fanOutOf(run, step);
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      return fanFailed(run, err.message, null, c, "template_error");
    }
    if (typeof plan === "string") return fanFailed(run, plan, null, c, "limit_reached");
    const nesting = nestingFault(run);
    if (nesting) return fanFailed(run, nesting, null, c, "limit_reached");
    const tenant = tenantOf(run);
    const attempt = run.attempt ?? 1;
    const base = { "parent.run_id": run.id, "parent.step_id": step.id };
    const state = run.steps[run.cursor];
    const shown = state.status === "waiting" ? (state.output as Partial<FanOutProgress> | null) : null;
    let next = shown?.started ?? 0;
    const unfinished = () => this.o.runs.count(tenant, { ...base, status: { $in: UNFINISHED } });
    let running = await unfinished();
    const failedNow = () =>
      this.o.runs.count(tenant, { ...base, parent_attempt: attempt, status: { $in: ENDED_BADLY } }, { limit: plan.tolerated + 1 });
    let failed = await failedNow();
    // Every item before `next` has a child of this attempt (unfinished, failed or succeeded) or one
    // that succeeded before: the succeeded are the rest, not counted (they are most of the children).
    const progress = (): FanOutProgress => ({
      count: plan.count,
      started: next,
      running,
      succeeded: Math.max(0, next - running - failed),
      failed,
    });
    if (failed > plan.tolerated) return this.failed(run, step, plan, progress(), c);

    let workflow: WorkflowDoc | undefined;
    let overtaken = false;
    drive: for (;;) {
      while (next < plan.count && running < plan.concurrency) {
        // A retry keeps the items that succeeded in an earlier attempt.
        if (attempt > 1 && (await this.o.runs.findOne(tenant, { ...base, "parent.index": next, status: "succeeded" }))) {
          next += 1;
          continue;
        }
        if (step.type === "map" && step.workflow_id !== undefined && !workflow) {
          const found = await this.workflowOf(run, step.workflow_id);
          if (typeof found === "string") return fanFailed(run, found, null, c, "workflow_not_found");
          workflow = found;
        }
        const started = await this.start(run, step, plan, next, c, workflow);
        if ("refused" in started) {
          await this.family.cancelChildren(run, step.id);
          return fanFailed(run, started.refused, await this.output(run, step, plan, progress()), c, started.code);
        }
        if ("deferredTo" in started) return fanDeferred(run, progress(), c, started.deferredTo);
        if ("found" in started) {
          // Stored by another drive. This one, overtaken by a child's end (which took its claim),
          // leaves the rest to the drive that holds the claim now.
          overtaken = (await this.o.runs.get(tenant, run.id))?.lease !== run.lease;
          if (overtaken) break drive;
          // Holding the claim, it found the children of a drive cut before it stored its counters:
          // each index below the highest stored was started, and finding each stored in turn would
          // outlast the claim. On past them, counting the unfinished ones again.
          next = pastStored(next, await this.highestStored(run, step.id, attempt));
          running = await unfinished();
          continue;
        }
        next += 1;
        running += 1;
      }
      // Counted again: children counted as started may have ended meanwhile.
      running = await unfinished();
      if (next >= plan.count || running >= plan.concurrency) break;
    }
    if (next > (shown?.started ?? 0)) {
      // Cancelled while children were being stored: its end may have looked for children before these were there.
      const parent = await this.o.runs.get(tenant, run.id);
      if (parent && TERMINAL.has(parent.status) && parent.status !== "succeeded") await this.family.cancelChildren(parent);
    }
    // Its write is refused (the claim is another's): what it shows is the other drive's to store.
    if (overtaken) return fanWaiting(run, progress(), c);
    failed = await failedNow();
    if (failed > plan.tolerated) return this.failed(run, step, plan, progress(), c);
    if (next < plan.count || running > 0) return fanWaiting(run, progress(), c);
    const output = await this.output(run, step, plan, progress());
    // A parallel step with on_error "continue" lets every branch end: one that failed fails the step, and the run goes on.
    if (step.type === "parallel" && failed > 0)
      return fanFailed(run, branchesFailed(plan.names ?? [], branchesOf(plan.names ?? [], output)), output, c);
    return fanSucceeded(run, output, c);
  }

  /** More children failed than tolerated: the unfinished ones are cancelled, and the step fails with what was done. */
  private async failed(run: RunDoc, step: FanOutStep, plan: FanOut, progress: FanOutProgress, c: Clock): Promise<RunWrite> {
    // A parallel step names the branches that ended badly, read before the others are cancelled.
    const culprits =
      step.type === "parallel"
        ? await this.o.runs.find(
            tenantOf(run),
            { "parent.run_id": run.id, "parent.step_id": step.id, parent_attempt: run.attempt ?? 1, status: { $in: ENDED_BADLY } },
            { limit: plan.count },
          )
        : [];
    await this.family.cancelChildren(run, step.id);
    const output = await this.output(run, step, plan, { ...progress, running: 0 });
    const why =
      step.type === "parallel"
        ? branchesFailed(
            plan.names ?? [],
            culprits.map((child) => ({ index: child.parent?.index ?? 0, status: child.status })),
          )
        : `${progress.failed} of its children failed or was cancelled (tolerated_failures: ${plan.tolerated})`;
    return fanFailed(run, why, output, c);
  }

  /** The highest index of the step's children started by this attempt, if any. */
  private async highestStored(run: RunDoc, stepId: string, attempt: number): Promise<number | undefined> {
    const filter = { "parent.run_id": run.id, "parent.step_id": stepId, parent_attempt: attempt };
    const [last] = await this.o.runs.find(tenantOf(run), filter, { sort: { "parent.index": -1 }, limit: 1 });
    return last?.parent?.index;
  }

  /** The step's output, read from its children in index order: the succeeded one of each item, else this attempt's. */
  private async output(run: RunDoc, step: FanOutStep, plan: FanOut, progress: FanOutProgress): Promise<Record<string, unknown>> {
    const tenant = tenantOf(run);
    const base = { "parent.run_id": run.id, "parent.step_id": step.id };
    const [succeeded, others] = await Promise.all([
      this.o.runs.find(tenant, { ...base, status: "succeeded" }, { limit: plan.count }),
      this.o.runs.find(tenant, { ...base, parent_attempt: run.attempt ?? 1, status: { $ne: "succeeded" } }, { limit: plan.count }),
    ]);
    const best = new Map<number, ChildResult>();
    for (const row of [...others, ...succeeded])
      best.set(row.parent?.index ?? 0, { id: row.id, index: row.parent?.index ?? 0, status: row.status, output: row.output ?? null });
    const children = [...best.values()];
    const succeededNow = children.filter((child) => child.status === "succeeded").length;
    return step.type === "parallel"
      ? parallelOutput(plan.names ?? [], children)
      : mapOutput({ ...progress, succeeded: succeededNow }, children);
  }

  /** The map's workflow, from its (maybe templated) id; or why there is none to run. */
  private async workflowOf(run: RunDoc, template: string): Promise<WorkflowDoc | string> {
    let target: unknown;
    try {
      target = render(template, scopeOf(run));
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      return err.message;
    }
    if (!isId("wf", target)) return `workflow_id gave ${JSON.stringify(target)}, which is not a workflow id (wf_…)`;
    const workflow = await this.o.workflows.get(tenantOf(run), target);
    if (!workflow) return `no workflow '${target}' in this environment`;
    if (workflow.status !== "active") return `the workflow '${target}' is inactive`;
    return workflow;
  }

  /** Stores the child at `index`, counted against the root's descendants and the minute's run starts, all or none. */
  private async start(run: RunDoc, step: FanOutStep, plan: FanOut, index: number, c: Clock, workflow?: WorkflowDoc): Promise<Start> {
    const tenant = tenantOf(run);
    const input = plan.input(index);
    const fault = childInputFault(input);
    if (fault) return { refused: `item ${index}: ${fault}`, code: "step_failed" };
    const child = fanChild(run, step, index, input, c.now, workflow);
    const root = child.root_run_id as string;
    const descendants = { id: descendantsBudgetId(root), limit: this.o.descendantsMax, expiresAt: c.now + this.o.budgetTtlMs };
    const budgetNow = this.o.now();
    const starts = this.o.startsBudget(tenant, budgetNow);
    let spent;
    try {
      spent = await this.o.startCounted(tenant, [descendants, starts], child);
    } catch (err) {
      // Stored by another drive of this attempt.
      if (isDuplicate(err)) return { found: true };
      throw err;
    }
    if (spent === descendants)
      return {
        refused: `limit reached: at most ${this.o.descendantsMax} runs may descend from one root run (RUN_DESCENDANTS_MAX; root ${root})`,
        code: "limit_reached",
      };
    if (spent) return { deferredTo: c.now + Math.max(0, MINUTE_MS - (budgetNow % MINUTE_MS)) };
    this.o.wake(child.id, tenant);
    return { stored: true };
  }
}
