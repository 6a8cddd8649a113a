/** Workflows' flow control per key (docs/workflows/README.md#flow-control). */
import { type JsonSchema, object } from "./common";

const key: JsonSchema = {
  type: "string",
  minLength: 1,
  maxLength: 1000,
  description: "A template over the run's input (e.g. `{{ input.customer_id }}`); absent: one key for the whole workflow",
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
