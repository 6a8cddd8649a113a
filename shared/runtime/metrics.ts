import type { ServiceBroker } from "moleculer";

/**
 * The platform's own Prometheus metrics (beside Moleculer's per-action ones), registered by the
 * service that measures each; the README lists them. Moleculer's reporter writes `wfp.http.requests`
 * as `wfp_http_requests`. With metrics off (no METRICS_PORT) every call here does nothing.
 */
export const METRICS = {
  httpRequests: {
    type: "counter",
    name: "wfp.http.requests.total",
    labelNames: ["route", "method", "status"],
    description: "HTTP requests answered, by route template, method and status sent",
  },
  httpDuration: {
    type: "histogram",
    name: "wfp.http.request.duration.seconds",
    labelNames: ["route", "method"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    description: "Time from a request's arrival to its answer",
  },
  deliveries: {
    type: "counter",
    name: "wfp.webhook.deliveries.total",
    labelNames: ["outcome"],
    description: "Deliveries settled by this node, by outcome (succeeded, failed)",
  },
  attempts: {
    type: "counter",
    name: "wfp.webhook.attempts.total",
    labelNames: ["outcome"],
    description: "Delivery attempts made by this node, by outcome (succeeded, failed)",
  },
  due: {
    type: "gauge",
    name: "wfp.webhook.deliveries.due",
    description: "Pending deliveries due now that no dispatcher holds (store-wide, capped at 10000)",
  },
  queued: { type: "gauge", name: "wfp.webhook.deliveries.queued", description: "Attempts queued or in flight on this dispatcher node" },
  oldestPending: {
    type: "gauge",
    name: "wfp.webhook.oldest.pending.age.seconds",
    description: "Age (since creation) of the oldest of the 100 pending deliveries next due; 0 when none is pending",
  },
  runsFinished: {
    type: "counter",
    name: "wfp.runs.finished.total",
    labelNames: ["status"],
    description: "Runs that ended, recorded by this node, by status",
  },
  runs: {
    type: "gauge",
    name: "wfp.runs",
    labelNames: ["status"],
    description: "Runs queued, running or waiting now (store-wide, capped at 10000)",
  },
  runsAwaitingApproval: {
    type: "gauge",
    name: "wfp.runs.awaiting.approval",
    description: "Runs waiting for an approval now (store-wide, capped at 10000)",
  },
} as const;

export type MetricName = keyof typeof METRICS;
/** Bounded counts (due deliveries, runs by status) stop at this. */
export const GAUGE_COUNT_CAP = 10_000;
/** How often the gauges read from the store are refreshed. */
export const GAUGE_INTERVAL_MS = 2_000;

/** The metrics one service reports: registers them once on its broker; no-ops with metrics off. */
export class Metrics {
  readonly enabled: boolean;
  constructor(
    private readonly broker: ServiceBroker,
    names: readonly MetricName[],
  ) {
    this.enabled = broker.isMetricsEnabled();
    if (!this.enabled) return;
    for (const name of names) {
      const def = METRICS[name];
      if (!broker.metrics.getMetric(def.name)) broker.metrics.register({ ...def } as Parameters<ServiceBroker["metrics"]["register"]>[0]);
    }
  }

  increment(name: MetricName, labels?: Record<string, string | number>): void {
    if (this.enabled) this.broker.metrics.increment(METRICS[name].name, labels);
  }

  set(name: MetricName, value: number, labels?: Record<string, string | number>): void {
    if (this.enabled) this.broker.metrics.set(METRICS[name].name, value, labels);
  }

  observe(name: MetricName, value: number, labels?: Record<string, string | number>): void {
    if (this.enabled) this.broker.metrics.observe(METRICS[name].name, value, labels);
  }
}
