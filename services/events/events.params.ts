import { EVENT_TYPE_MAX, MARKERS, UNMARK_MAX } from "../../shared/records/events";
import { pageParams, type PageParams } from "../../shared/api/pagination";

/** The largest `data` an event may carry, as JSON. Receivers get it in one POST; keep it modest. */
export const EVENT_DATA_MAX_BYTES = 64 * 1024;

export const emitParams = {
  $$strict: true,
  // The name's shape and the reserved prefixes are checked in the logic, to say which rule failed.
  type: { type: "string", min: 1, max: EVENT_TYPE_MAX },
  data: { type: "object", optional: true },
} as const;
export interface EmitParams {
  type: string;
  data?: Record<string, unknown>;
}

export const listParams = {
  $$strict: true,
  ...pageParams,
  type: { type: "string", min: 1, max: EVENT_TYPE_MAX, optional: true },
} as const;
export interface ListParams extends PageParams {
  type?: string;
}

/** The catalogue pages by number, or by cursor on the type's name (system types first, then custom ones by name). */
export const typesParams = { $$strict: true, ...pageParams } as const;
export type TypesParams = PageParams;

/** An event as a service made it (see publishParams). */
const recordParams = {
  org_id: { type: "string", min: 1 },
  environment: { type: "enum", values: ["live", "test"] },
  type: { type: "string", min: 1, max: EVENT_TYPE_MAX },
  data: { type: "object" },
  source: { type: "string", min: 1, max: 64 },
} as const;

/** What `publish` takes: events as their services made them, each with its id and time. */
export const publishParams = {
  events: {
    type: "array",
    min: 1,
    max: 1000,
    items: {
      type: "object",
      props: {
        ...recordParams,
        id: { type: "string", min: 1, max: 64 },
        created_at: { type: "string", min: 1, max: 64 },
        origin_workflow_id: { type: "string", optional: true },
        chain_depth: { type: "number", integer: true, optional: true },
        chain_root: { type: "string", optional: true },
      },
    },
  },
} as const;

export const unmarkParams = {
  marker: { type: "enum", values: [...MARKERS] },
  ids: { type: "array", min: 1, max: UNMARK_MAX, items: { type: "string", min: 1 } },
} as const;

export { idParams, type IdParams } from "../../shared/api/pagination";
