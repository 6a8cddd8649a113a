import type { ServiceBroker } from "moleculer";
import { publishEvents, type EventDoc, type PublishedEvent } from "../../shared/records/events";
import type { OutboxEvent, RunDoc } from "./run-doc";

/** Where a run's outbox goes: the broker to the events service, the log, and who is told of runs that ended. */
export interface OutboxTarget {
  broker: ServiceBroker;
  logger: ServiceBroker["logger"];
  /** Told once per run, when its `workflow.completed` is stored (a publish repeated after a crash finds it stored). */
  ended?: (event: EventDoc, run: RunDoc) => void;
}

/**
 * Publishes `events` of a run's outbox through the events service, which stores each id once; for
 * each `workflow.completed` stored now, tells `ended` and logs a failed run with its failed step.
 */
export async function publishOutbox(to: OutboxTarget, run: RunDoc, events: OutboxEvent[]): Promise<void> {
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
  const stored = new Set(await publishEvents(to.broker, docs));
  for (const doc of docs) {
    if (doc.type !== "workflow.completed" || !stored.has(doc.id)) continue;
    to.ended?.(doc, run);
    if (doc.data.status === "failed") {
      const step = run.steps.find((s) => s.status === "failed");
      to.logger.warn(
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
