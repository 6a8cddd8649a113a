import { EVENT_TYPE_MAX } from "../../shared/events";
import { offsetParams, pageParams, type PageParams } from "../../shared/pagination";

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

export const typesParams = { $$strict: true, ...offsetParams } as const;
export type TypesParams = Pick<PageParams, "page" | "per_page">;

export { idParams, type IdParams } from "../../shared/pagination";
