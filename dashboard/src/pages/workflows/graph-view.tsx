import "./graph.css";
import type { ComponentChildren } from "preact";
import { href } from "../../session";
import { Status, Time } from "../../ui";
import { durationText } from "./run-facts.logic";
import { SkipReasonText } from "./skip-reason";
import { incomingOf, type ChildLink, type Edge, type FanCounts, type Graph, type GraphNode, type Lane, type Wait } from "./graph.logic";

/**
 * Draws a graph model (graph.logic.ts) as boxes and connectors: a sequence top to bottom, a
 * parallel's branches side by side inside its box (stacked when the screen is narrow), a map's
 * children listed and counted. Each step is a focusable list item named by its id, type and
 * status, with `data-status`; a sequence is an ordered list, a parallel's branches a list of them.
 * The connectors are drawn by CSS from each step's `data-edge` (the edge into it), unseen by readers.
 */
interface Drawing {
  incoming: ReadonlyMap<string, Edge["kind"]>;
  /** The run's children list (absent: a definition). */
  childrenHref?: string;
}

const runHref = (c: ChildLink, d: Drawing) =>
  c.workflowId ? href("workflows", c.workflowId, "runs", c.runId) : (d.childrenHref ?? href("workflows"));

function ChildRef({ child, drawing }: { child: ChildLink; drawing: Drawing }) {
  return (
    <span class="g-child">
      <a href={runHref(child, drawing)}>{child.runId}</a> {child.status && <Status value={child.status} />}
    </span>
  );
}

const matchText = (match: Record<string, unknown> | undefined) =>
  match && Object.keys(match).length > 0 ? <code class="break">{JSON.stringify(match)}</code> : null;

/** What a wait waits for: while it waits, until when; before, for how long at most; after, that it waited. */
function WaitNote({ wait, status }: { wait: Wait; status: GraphNode["status"] }) {
  const waiting = status === "waiting";
  const done = status !== null && status !== "waiting" && status !== "pending" && status !== "running";
  const limit = !waiting && !done && wait.limitMs !== null ? `, at most ${durationText(wait.limitMs)}` : "";
  const until = waiting && wait.until && (
    <>
      , until <Time at={wait.until} />
    </>
  );
  const verb = done ? "Waited" : "Waits";
  let what: ComponentChildren;
  if (wait.kind === "event") {
    const match = matchText(wait.match);
    what = (
      <>
        {verb} for <code>{wait.eventType}</code>
        {match && <> with {match}</>}
        {wait.filter && (
          <>
            {" "}
            where <code class="break">{wait.filter}</code>
          </>
        )}
      </>
    );
  } else if (wait.kind === "delay") {
    // A delay's wait is its length: until its end once it waits, else how long.
    return (
      <p class="g-wait">
        {waiting && wait.until ? (
          <>
            Waits until <Time at={wait.until} />
          </>
        ) : (
          `${verb} ${durationText(wait.limitMs ?? 0)}`
        )}
        .
      </p>
    );
  } else what = `${verb} for ${wait.kind === "approval" ? "a person's decision" : "its child run"}`;
  return (
    <p class="g-wait">
      {what}
      {limit}
      {until}.
    </p>
  );
}

function Counts({ counts, what }: { counts: FanCounts; what: string }) {
  const parts = [
    [counts.succeeded, "succeeded"],
    [counts.failed, "failed or cancelled"],
    [counts.running, "running"],
    [counts.other, "not started"],
  ] as const;
  return (
    <p class="g-counts">
      {counts.count} {what}:{" "}
      {parts
        .filter(([n]) => n > 0)
        .map(([n, label]) => `${n} ${label}`)
        .join(", ") || "none yet"}
    </p>
  );
}

function MapChildren({ node, drawing }: { node: GraphNode; drawing: Drawing }) {
  const more = Math.max(0, (node.counts?.count ?? 0) - node.children.length);
  // A map in a branch lists its children under the branch's run.
  const list = node.inRun ? href("workflows", node.inRun.workflowId, "runs", node.inRun.runId, "children") : drawing.childrenHref;
  return (
    <>
      {node.children.length > 0 && (
        <ul class="g-children" aria-label={`Children of ${node.id}`}>
          {node.children.map((c) => (
            <li key={c.runId}>
              <span class="muted">#{c.index}</span> <ChildRef child={c} drawing={drawing} />
            </li>
          ))}
        </ul>
      )}
      {list && node.counts && (
        <p class="small">
          <a href={list}>{more > 0 ? `All ${node.counts.count} children` : "The children list"}</a>
        </p>
      )}
    </>
  );
}

function SkipNote({ node }: { node: GraphNode }) {
  return node.skipped ? <SkipReasonText why={node.skipped} class="g-skip" /> : null;
}

function NodeBox({ node, drawing }: { node: GraphNode; drawing: Drawing }) {
  const edge = drawing.incoming.get(node.key);
  // A step passed over or cancelled waited for nothing.
  const waited = node.wait !== null && node.status !== "skipped" && node.status !== "cancelled";
  const name = `${node.id} (${node.type})${node.status ? `: ${node.status}` : ""}`;
  return (
    <li
      class="g-node"
      tabIndex={0}
      aria-label={name}
      data-status={node.status ?? "defined"}
      data-type={node.type}
      {...(edge && { "data-edge": edge })}
    >
      <header>
        <code>{node.id}</code> <span class="chip">{node.type}</span> {node.status && <Status value={node.status} />}
      </header>
      {node.label && <p class="g-label break">{node.label}</p>}
      {node.condition !== null && !node.skipped && (
        <p class="g-if break">
          {node.status === null || node.status === "pending" ? "Only if" : "Its condition held"}: <code>{node.condition}</code>
        </p>
      )}
      <SkipNote node={node} />
      {waited && node.wait?.kind !== "child" && <WaitNote wait={node.wait!} status={node.status} />}
      {node.type === "run_workflow" && node.workflowId && (
        <p class="small">
          Workflow <a href={href("workflows", node.workflowId)}>{node.workflowId}</a>
        </p>
      )}
      {node.type === "run_workflow" &&
        node.children.map((c) => (
          <p key={c.runId} class="g-child-line">
            Child run <ChildRef child={c} drawing={drawing} />
          </p>
        ))}
      {waited && node.wait?.kind === "child" && <WaitNote wait={node.wait} status={node.status} />}
      {node.counts && <Counts counts={node.counts} what={node.type === "map" ? "children" : "branches"} />}
      {node.type === "map" && node.workflowId && (
        <p class="small">
          Each item runs workflow <a href={href("workflows", node.workflowId)}>{node.workflowId}</a>
        </p>
      )}
      {node.type === "map" && <MapChildren node={node} drawing={drawing} />}
      {node.lanes.length > 0 && (
        <ul
          class={`g-lanes ${node.type}`}
          aria-label={node.type === "parallel" ? `Branches of ${node.id}` : `Steps of each item of ${node.id}`}
        >
          {node.lanes.map((lane) => (
            <LaneView key={lane.key} lane={lane} drawing={drawing} />
          ))}
        </ul>
      )}
    </li>
  );
}

function LaneView({ lane, drawing }: { lane: Lane; drawing: Drawing }) {
  return (
    <li class="g-lane" aria-label={lane.name === "each item" ? "Each item" : `Branch ${lane.name}`}>
      <p class="g-lane-head">
        <strong>{lane.name}</strong> {lane.child && <ChildRef child={lane.child} drawing={drawing} />}
      </p>
      <Sequence nodes={lane.nodes} drawing={drawing} />
    </li>
  );
}

function Sequence({ nodes, drawing }: { nodes: GraphNode[]; drawing: Drawing }) {
  return (
    <ol class="g-seq">
      {nodes.map((n) => (
        <NodeBox key={n.key} node={n} drawing={drawing} />
      ))}
    </ol>
  );
}

/** A graph drawn, named `label`; `childrenHref` is the run's children list (a run graph only). */
export function GraphView({ graph, label, childrenHref }: { graph: Graph & { top: GraphNode[] }; label: string; childrenHref?: string }) {
  const drawing: Drawing = { incoming: incomingOf(graph), ...(childrenHref && { childrenHref }) };
  return (
    <figure class="graph" aria-label={label}>
      <Sequence nodes={graph.top} drawing={drawing} />
    </figure>
  );
}
