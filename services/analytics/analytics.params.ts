const date = { type: "string", min: 1, max: 40, optional: true } as const;

export const usageParams = {
  $$strict: true,
  from: date,
  to: date,
  granularity: { type: "enum", values: ["hour", "day"], optional: true, default: "hour" },
  group_by: { type: "enum", values: ["route", "status", "key"], optional: true },
} as const;
export interface UsageParams {
  from?: string;
  to?: string;
  granularity: "hour" | "day";
  group_by?: "route" | "status" | "key";
}

export const windowParams = { $$strict: true, from: date, to: date } as const;
export interface WindowParams {
  from?: string;
  to?: string;
}

const row = {
  type: "object",
  strict: true,
  props: {
    minute: { type: "number", integer: true, min: 0 },
    org_id: { type: "string", min: 1 },
    environment: { type: "enum", values: ["live", "test"] },
    key_id: { type: "string", min: 1 },
    method: { type: "string", min: 1, max: 10 },
    route: { type: "string", min: 1, max: 200 },
    status: { type: "number", integer: true, min: 100, max: 599 },
    count: { type: "number", integer: true, min: 1 },
    errors: { type: "number", integer: true, min: 0 },
    latency_ms_sum: { type: "number", min: 0 },
    hist: { type: "array", items: { type: "number", integer: true, min: 0 } },
  },
} as const;

export const ingestParams = {
  batch_id: { type: "string", min: 1, max: 100 },
  rows: { type: "array", items: row, max: 100_000 },
} as const;

export const maintainParams = { now: { type: "number", integer: true, min: 0, optional: true } } as const;
