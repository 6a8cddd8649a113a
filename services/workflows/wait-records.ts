import { collectionSpec, type Doc, type Environment } from "../../shared/storage/types";
import type { MatchValue } from "./waits.logic";

/**
 * A run registered to react to an event (waits.logic.ts): a wait_for_event step that waits
 * (`kind: wait`), or one entry of its workflow's cancel_on (`kind: cancel`). Found by `key` when an
 * event comes; deleted once it has done its work or its run has ended, or else pruned once past
 * `until`. A registration whose run has moved on meanwhile is deleted by the first event that finds it.
 */
export interface WaitDoc extends Doc {
  environment: Environment;
  key: string;
  kind: "wait" | "cancel";
  run_id: string;
  workflow_id: string;
  /** The run's step and attempt when it began waiting (`kind: wait`). */
  step?: number;
  attempt: number;
  event_type: string;
  match: Record<string, MatchValue>;
  filter?: string;
  /** Events created at or after this count (ISO). */
  since: string;
  /** After this (ISO) the registration does nothing (the wait timed out, the run's cancel_on lapsed) and is pruned. */
  until: string;
}

/** A set of match paths some registration of an event type uses: what an event of that type computes its keys for. */
export interface ShapeDoc extends Doc {
  environment: Environment;
  event_type: string;
  paths: string[];
  /** The latest `until` of the registrations under it: pruned after that. */
  until: string;
}

export const WAITS = collectionSpec<WaitDoc>("workflow_waits", [
  { fields: { org_id: 1, environment: 1, key: 1, id: 1 } },
  // A run's, deleted when it ends.
  { fields: { org_id: 1, environment: 1, run_id: 1 } },
  { fields: { until: 1 } },
]);

export const WAIT_SHAPES = collectionSpec<ShapeDoc>("workflow_wait_shapes", [
  { fields: { org_id: 1, environment: 1, event_type: 1, until: 1 } },
  { fields: { until: 1 } },
]);

/** What the engine stores before the write that makes a run wait (or arms its cancel_on): the registration and its shape. */
export interface Registration {
  wait: WaitDoc;
  paths: string[];
}
