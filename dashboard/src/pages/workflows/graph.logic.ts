/**
 * A workflow drawn as a graph (docs/dashboard.md#a-run-as-a-graph): its steps in order, a
 * `parallel` step's branches side by side between a fork and a join, a `map` as one node with its
 * children's counts and a bounded list of them, a `run_workflow` step with its child. Without a
 * run it is the definition; with one, each node carries its step's status, why it was skipped,
 * what it waits for and until when, and the child runs found for it. Pure: the page reads the run
 * and a page of each such step's children (graph-reads.logic.ts), this lays them out.
 */
import type { Run, RunStep, Step, StepStatus } from "../../../../shared/api/wire";
import { skipReasonOf, type SkipReason } from "./run-facts.logic";

/** A map node lists at most this many of its children; the rest are counted and on the children list. */
export const MAP_CHILDREN_SHOWN = 10;

/** A child run the graph links to. */
export interface ChildLink {
  runId: string;
  /** The workflow the child runs (its page's address), null when not known. */
  workflowId: string | null;
  status: string | null;
  /** The item's index (map), the branch's position (parallel), 0 (run_workflow). */
  index: number;
}

/** A map's or a parallel's children by status, from its step's output. */
export interface FanCounts {
  count: number;
  succeeded: number;
  failed: number;
  running: number;
  /** Not started, or cancelled before they ended. */
  other: number;
}

/** What a step waits for: an event, a delay's end, a person, or a child run; and until when. */
export interface Wait {
  kind: "event" | "delay" | "approval" | "child";
  /** event: the type and the match (its templates filled once the run reached it), and the filter. */
  eventType?: string;
  match?: Record<string, unknown>;
  filter?: string;
  /** When the wait ends at the latest, once the step waits (null: not waiting, or no limit). */
  until: string | null;
  /** The wait's length (delay) or time limit, as the definition gives it (null: none). */
  limitMs: number | null;
}

export interface GraphNode {
  /** Unique in the graph: the step ids from the top, with branch names (`both.crm.contact`). */
  key: string;
  id: string;
  type: Step["type"];
  /** What the step does, in a few words. */
  label: string;
  /** Null in a definition, or for a step of a child run not read. */
  status: StepStatus | null;
  condition: string | null;
  skipped: SkipReason | null;
  wait: Wait | null;
  /** run_workflow: its child; map: at most MAP_CHILDREN_SHOWN of them, by index. */
  children: ChildLink[];
  /** map and parallel, once the run reached them. */
  counts: FanCounts | null;
  /** parallel: one lane per branch; map with inline steps: one lane, the steps each item runs. */
  lanes: Lane[];
  /** run_workflow and map: the saved workflow they run, when the definition names one (not a template). */
  workflowId: string | null;
  /** A step of a branch's run: that run, whose children list is its children's (null: the run drawn). */
  inRun: { runId: string; workflowId: string } | null;
}

export interface Lane {
  key: string;
  /** The branch's name; `each item` for a map's steps. */
  name: string;
  /** A parallel branch's child run, once started. */
  child: ChildLink | null;
  nodes: GraphNode[];
}

/** `sequence`: one step after another; `fork`: a parallel into its branches' first steps; `join`: a branch's last step back to its parallel. */
export interface Edge {
  from: string;
  to: string;
  kind: "sequence" | "fork" | "join";
}

export interface Graph {
  nodes: GraphNode[];
  edges: Edge[];
}

/**
 * A run as the graph reads it, and the children the page read of its steps (`GET
 * /runs?parent_run_id=&step_id=`: each item's newest first), and of the runs of its parallels'
 * branches, by the branch run's id.
 */
export interface RunState {
  run: Pick<Run, "status" | "steps" | "workflow_id">;
  children: readonly Pick<Run, "id" | "status" | "steps" | "workflow_id" | "parent">[];
  below?: ReadonlyMap<string, RunState["children"]>;
}

type Child = RunState["children"][number];

const LITERAL_WORKFLOW = /^wf_[A-Za-z0-9]+$/;
const literalWorkflow = (id: string | undefined) => (id !== undefined && LITERAL_WORKFLOW.test(id) ? id : null);

const record = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
const num = (v: unknown) => (typeof v === "number" ? v : 0);

/** What a step does, in a few words. */
export function labelOf(step: Step): string {
  switch (step.type) {
    case "http":
      return `${step.method ?? "POST"} ${step.url}`;
    case "delay":
      return "waits a while";
    case "approval":
      return step.message ?? "asks a person";
    case "emit":
      return `emits ${step.event_type}`;
    case "stop":
      return `ends the run as ${step.status}`;
    case "set":
      return "sets an output";
    case "wait_for_event":
      return "waits for an event";
    case "run_workflow": {
      const what = literalWorkflow(step.workflow_id) ? "runs a saved workflow" : `runs the workflow ${step.workflow_id}`;
      return `${what} as a child run${step.wait === false ? ", without waiting" : ""}`;
    }
    case "map":
      return `for each of ${step.items}, ${step.max_concurrency} at once`;
    case "parallel": {
      const n = Object.keys(step.branches).length;
      return `${n} branch${n === 1 ? "" : "es"} at once`;
    }
  }
}

function waitOf(step: Step, state: RunStep | undefined): Wait | null {
  const waiting = state?.status === "waiting";
  switch (step.type) {
    case "wait_for_event":
      return {
        kind: "event",
        eventType: state?.waiting_for?.event_type ?? step.event_type,
        match: state?.waiting_for?.match ?? step.match,
        ...(step.filter !== undefined && { filter: step.filter }),
        until: waiting ? (state.timeout_at ?? null) : null,
        limitMs: step.timeout_ms,
      };
    case "delay": {
      const until = waiting && state.started_at ? new Date(Date.parse(state.started_at) + step.duration_ms).toISOString() : null;
      return { kind: "delay", until, limitMs: step.duration_ms };
    }
    case "approval":
      return { kind: "approval", until: waiting ? (state.timeout_at ?? null) : null, limitMs: step.timeout_ms ?? null };
    case "run_workflow":
      if (step.wait === false) return null;
      return { kind: "child", until: waiting ? (state.timeout_at ?? null) : null, limitMs: step.timeout_ms ?? null };
    default:
      return null;
  }
}

function countsOf(state: RunStep | undefined): FanCounts | null {
  const out = record(state?.output);
  if (!out || typeof out.count !== "number") return null;
  const [succeeded, failed, running] = [num(out.succeeded), num(out.failed), num(out.running)];
  return { count: out.count, succeeded, failed, running, other: Math.max(0, out.count - succeeded - failed - running) };
}

const linkOf = (c: Child): ChildLink => ({ runId: c.id, workflowId: c.workflow_id, status: c.status, index: c.parent?.index ?? 0 });

/** The step's children among those read: the newest of each index (a retry starts a new child for an index). */
function childrenOf(children: readonly Child[], stepId: string): Child[] {
  const byIndex = new Map<number, Child>();
  for (const c of children) if (c.parent?.step_id === stepId && !byIndex.has(c.parent.index)) byIndex.set(c.parent.index, c);
  return [...byIndex.values()].sort((a, b) => (a.parent?.index ?? 0) - (b.parent?.index ?? 0));
}

/** A run_workflow's child: the one read, else the run id its output names. */
function runWorkflowChild(step: Step, state: RunStep | undefined, children: readonly Child[]): ChildLink[] {
  const [read] = childrenOf(children, step.id);
  if (read) return [linkOf(read)];
  const out = record(state?.output);
  if (!out || typeof out.run_id !== "string") return [];
  const workflowId = step.type === "run_workflow" ? literalWorkflow(step.workflow_id) : null;
  return [{ runId: out.run_id, workflowId, status: typeof out.status === "string" ? out.status : null, index: 0 }];
}

/** A parallel's lanes: each branch's steps, with the statuses of its child run when read. */
function branchLanes(key: string, step: Extract<Step, { type: "parallel" }>, ctx: Context): Lane[] {
  const read = ctx.state ? childrenOf(ctx.state.children, step.id) : [];
  const out = record(ctx.state?.run.steps.find((s) => s.id === step.id)?.output);
  return Object.entries(step.branches).map(([name, steps], index) => {
    const found = read.find((c) => c.parent?.index === index);
    const ended = record(out?.[name]);
    const child: ChildLink | null = found
      ? linkOf(found)
      : typeof ended?.run_id === "string"
        ? {
            runId: ended.run_id,
            workflowId: ctx.state?.run.workflow_id ?? null,
            status: typeof ended.status === "string" ? ended.status : null,
            index,
          }
        : null;
    const below = ctx.state?.below;
    const state = found ? { run: found, children: below?.get(found.id) ?? [], ...(below && { below }) } : null;
    const inRun = found ? { runId: found.id, workflowId: found.workflow_id } : null;
    const inner: Context = { state, graph: ctx.graph, bare: false, inRun };
    return { key: `${key}.${name}`, name, child, nodes: sequence(`${key}.${name}`, steps, inner) };
  });
}

interface Context {
  /** The run whose steps these are, and the children read (null: a definition, or a child run not read). */
  state: RunState | null;
  graph: Graph;
  /** Steps known only by the run's own record (id, type, status): their definition is no longer kept. */
  bare: boolean;
  /** The branch run these steps are of, below the run drawn. */
  inRun?: GraphNode["inRun"];
}

const skippedOf = (state: RunStep | undefined, step: Step, ctx: Context) =>
  state && ctx.state ? skipReasonOf(ctx.state.run, state, ctx.bare ? undefined : step) : null;

/** A step of a run whose definition is gone: its id, type and status only. */
const bareNode = (key: string, step: Step): GraphNode => ({
  key,
  id: step.id,
  type: step.type,
  label: "",
  status: null,
  condition: null,
  skipped: null,
  wait: null,
  children: [],
  counts: null,
  lanes: [],
  workflowId: null,
  inRun: null,
});

function nodeOf(prefix: string, step: Step, ctx: Context): GraphNode {
  const key = prefix ? `${prefix}.${step.id}` : step.id;
  const state = ctx.state?.run.steps.find((s) => s.id === step.id);
  const children = ctx.state?.children ?? [];
  let lanes: Lane[] = [];
  let shown: ChildLink[] = [];
  if (ctx.bare) return { ...bareNode(key, step), status: state?.status ?? null, skipped: skippedOf(state, step, ctx) };
  if (step.type === "parallel") lanes = branchLanes(key, step, ctx);
  if (step.type === "map") {
    if (step.steps) {
      const each: Context = { state: null, graph: ctx.graph, bare: false };
      lanes = [{ key: `${key}.each`, name: "each item", child: null, nodes: sequence(`${key}.each`, step.steps, each) }];
    }
    shown = childrenOf(children, step.id).slice(0, MAP_CHILDREN_SHOWN).map(linkOf);
  }
  if (step.type === "run_workflow") shown = runWorkflowChild(step, state, children);
  return {
    key,
    id: step.id,
    type: step.type,
    label: labelOf(step),
    status: state?.status ?? null,
    condition: step.if ?? null,
    skipped: skippedOf(state, step, ctx),
    wait: waitOf(step, state),
    children: shown,
    counts: step.type === "map" || step.type === "parallel" ? countsOf(state) : null,
    lanes,
    workflowId: step.type === "run_workflow" || step.type === "map" ? literalWorkflow(step.workflow_id) : null,
    inRun: ctx.inRun ?? null,
  };
}

/** Lays out one list of steps, adding its nodes and edges to the graph; returns the lane's nodes. */
function sequence(prefix: string, steps: readonly Step[], ctx: Context): GraphNode[] {
  const nodes = steps.map((s) => nodeOf(prefix, s, ctx));
  nodes.forEach((node, i) => {
    ctx.graph.nodes.push(node);
    if (i > 0) ctx.graph.edges.push({ from: nodes[i - 1].key, to: node.key, kind: "sequence" });
    if (node.type !== "parallel") return;
    for (const lane of node.lanes) {
      const first = lane.nodes[0];
      const last = lane.nodes.at(-1);
      if (first) ctx.graph.edges.push({ from: node.key, to: first.key, kind: "fork" });
      if (last) ctx.graph.edges.push({ from: last.key, to: node.key, kind: "join" });
    }
  });
  return nodes;
}

/** A definition with no run kept: the run's own steps, in order, with their statuses. */
const fromRun = (steps: readonly RunStep[]): Step[] => steps.map((s) => ({ id: s.id, type: s.type }) as Step);

/**
 * The graph of `steps` (a workflow version's definition) and, when given, of a run of it and the
 * children read. A run whose version is no longer kept is drawn from its own steps.
 */
export function graphOf(steps: readonly Step[] | undefined, state: RunState | null = null): Graph & { top: GraphNode[] } {
  const graph: Graph = { nodes: [], edges: [] };
  const definition = steps ?? fromRun(state?.run.steps ?? []);
  const top = sequence("", definition, { state, graph, bare: steps === undefined });
  return { ...graph, top };
}

/** The edges into each node, by its key: how the view draws the connector above it. */
export function incomingOf(graph: Graph): ReadonlyMap<string, Edge["kind"]> {
  const into = new Map<string, Edge["kind"]>();
  for (const e of graph.edges) if (e.kind !== "join") into.set(e.to, e.kind);
  return into;
}
