/** Workflows' flow control per key (docs/workflows/README.md#flow-control). */
import { type JsonSchema, object } from "./common";

/** The rule services/workflows/flow-control.logic.ts (keyTemplate) enforces, stated for clients. */
const key: JsonSchema = {
  type: "string",
  minLength: 1,
  maxLength: 1000,
  pattern: "\\S",
  description:
    "A template over the run's input, rendered as text per run (e.g. `{{ input.customer_id }}`). Each `{{ }}` may read `input` only: " +
    "a blank key, or one whose `{{ }}` names a step, a secret or any other variable or does not compile, is refused " +
    "`400 parameter_invalid` naming the field (e.g. `concurrency.key`). Text with no `{{ }}` is one constant key for every run, " +
    "as leaving the key out is (one key for the whole workflow); an input without the field read gives the empty key",
};

export const FLOW_RESOURCES: Record<string, JsonSchema> = {
  FlowConcurrency: object(
    "FlowConcurrency",
    { limit: { type: "integer", minimum: 1, maximum: 1000, description: "Runs of one key unfinished at once, at most" }, key },
    ["key"],
    "At most `limit` runs of one key at once; the others wait queued (queued_reason concurrency) and start oldest first",
  ),
  FlowThrottle: object(
    "FlowThrottle",
    {
      limit: { type: "integer", minimum: 1, maximum: 10000, description: "Runs of one key started per period, at most" },
      period_ms: { type: "integer", minimum: 100, maximum: 86400000 },
      key: { ...key, description: `${key.description as string}; with concurrency too, it may differ from its key` },
    },
    ["key"],
    "At most `limit` starts of one key per `period_ms` window; the others wait queued (queued_reason throttle) for a later window",
  ),
  FlowDebounce: object(
    "FlowDebounce",
    {
      period_ms: { type: "integer", minimum: 100, maximum: 604800000, description: "A start within this of the last one joins its burst" },
      max_wait_ms: {
        type: "integer",
        minimum: 100,
        maximum: 604800000,
        description: "The burst's run starts at most this long after its first start",
      },
      key,
    },
    ["max_wait_ms", "key"],
    "A burst of starts of one key starts one run, with the last start's input (queued_reason debounce while the burst lasts)",
  ),
};
