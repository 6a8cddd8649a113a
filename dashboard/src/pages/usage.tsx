import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { OutcomeReport, UsageBucket, UsageReport } from "../api";
import { Choice, Empty, Loaded, useApi } from "../ui";

const WINDOWS = {
  "24h": { label: "Last 24 hours", ms: 24 * 3_600_000, granularity: "hour" },
  "7d": { label: "Last 7 days", ms: 7 * 24 * 3_600_000, granularity: "hour" },
  "30d": { label: "Last 30 days", ms: 30 * 24 * 3_600_000, granularity: "day" },
} as const;
type WindowName = keyof typeof WINDOWS;
const WINDOW_LABELS = Object.fromEntries(Object.entries(WINDOWS).map(([name, w]) => [name, w.label])) as Record<WindowName, string>;

const percent = (rate: number | null) => (rate === null ? "—" : `${(rate * 100).toFixed(1)} %`);

export function UsagePage() {
  const [windowName, setWindowName] = useState<WindowName>("24h");
  // The window is fixed when chosen (or refreshed), so polling does not slide it under the reader.
  const [to, setTo] = useState(() => Date.now());
  const win = WINDOWS[windowName];
  const query = { from: new Date(to - win.ms).toISOString(), to: new Date(to).toISOString() };
  const overTime = useApi<UsageReport>("/analytics/usage", { ...query, granularity: win.granularity });
  const byRoute = useApi<UsageReport>("/analytics/usage", { ...query, granularity: "day", group_by: "route" });
  const runs = useApi<OutcomeReport>("/analytics/workflows", query);
  const deliveries = useApi<OutcomeReport>("/analytics/webhooks", query);

  return (
    <section aria-labelledby="usage-title">
      <header class="page-head">
        <h2 id="usage-title">Usage</h2>
        <div class="filters">
          <Choice
            label="Window"
            name="window"
            value={windowName}
            options={WINDOW_LABELS}
            onChange={(w) => (setWindowName(w), setTo(Date.now()))}
          />
          <button type="button" class="outline secondary small" onClick={() => setTo(Date.now())}>
            Refresh
          </button>
        </div>
      </header>

      <div class="stats">
        <Rate title="Run success rate" state={runs} unit="runs ended" />
        <Rate title="Delivery attempt success rate" state={deliveries} unit="attempts" />
      </div>

      <article aria-labelledby="requests-title">
        <h3 id="requests-title">Requests and errors</h3>
        <Loaded state={overTime} what="request counts">
          {(answer) => <RequestsChart buckets={answer.buckets} granularity={answer.granularity} />}
        </Loaded>
      </article>

      <article aria-labelledby="routes-title">
        <h3 id="routes-title">By route</h3>
        <Loaded state={byRoute} what="routes">
          {(answer) => <RoutesTable buckets={answer.buckets} />}
        </Loaded>
      </article>
    </section>
  );
}

function Rate({ title, state, unit }: { title: string; state: ReturnType<typeof useApi<OutcomeReport>>; unit: string }) {
  return (
    <article class="stat" aria-label={title}>
      <h3>{title}</h3>
      <Loaded state={state} what={title.toLowerCase()}>
        {(o) => (
          <>
            <p class="big" data-rate>
              {percent(o.success_rate)}
            </p>
            <p class="muted small">
              {o.total} in the window
              {o.attempt_counts && ` · ${o.attempt_counts.total} attempts`}
              {o.success_rate === null && ` · no ${unit} yet`}
            </p>
            {o.delivery_success_rate !== undefined && (
              <p class="muted small" data-settled-rate>
                {percent(o.delivery_success_rate)} of settled deliveries succeeded
              </p>
            )}
            <ul class="by-status">
              {Object.entries(o.by_status).map(([status, n]) => (
                <li key={status}>
                  <span class={`status ${status === "succeeded" ? "ok" : status === "failed" ? "bad" : ""}`}>{status}</span> {n}
                </li>
              ))}
            </ul>
          </>
        )}
      </Loaded>
    </article>
  );
}

function RequestsChart({ buckets, granularity }: { buckets: UsageBucket[]; granularity: "hour" | "day" }) {
  const box = useRef<HTMLDivElement>(null);
  const total = buckets.reduce((n, b) => n + b.count, 0);
  const errors = buckets.reduce((n, b) => n + b.errors, 0);
  useEffect(() => {
    const el = box.current;
    if (!el || total === 0) return;
    const styles = getComputedStyle(document.documentElement);
    const primary = styles.getPropertyValue("--pico-primary").trim() || "#1f6feb";
    const danger = "#d93526";
    const data: uPlot.AlignedData = [
      buckets.map((b) => Date.parse(b.start) / 1000),
      buckets.map((b) => b.count),
      buckets.map((b) => b.errors),
    ];
    const plot = new uPlot(
      {
        width: el.clientWidth || 600,
        height: 240,
        series: [
          {},
          { label: "Requests", stroke: primary, fill: `${primary}22`, width: 2 },
          { label: "Errors", stroke: danger, fill: `${danger}22`, width: 2 },
        ],
        axes: [{ stroke: styles.color }, { stroke: styles.color }],
        scales: { x: { time: true } },
      },
      data,
      el,
    );
    const resize = new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height: 240 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [buckets, total]);

  if (total === 0) return <Empty>No requests in this window yet.</Empty>;
  return (
    <>
      <div
        ref={box}
        class="chart"
        role="img"
        aria-label={`Requests per ${granularity}: ${total} requests, ${errors} errors in the window`}
      />
      <details>
        <summary>Data as a table</summary>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">{granularity === "hour" ? "Hour" : "Day"}</th>
                <th scope="col">Requests</th>
                <th scope="col">Errors</th>
                <th scope="col">p50</th>
                <th scope="col">p95</th>
              </tr>
            </thead>
            <tbody>
              {buckets
                .filter((b) => b.count > 0)
                .map((b) => (
                  <tr key={b.start}>
                    <td>{new Date(b.start).toLocaleString()}</td>
                    <td>{b.count}</td>
                    <td>{b.errors}</td>
                    <td>{b.p50_ms ?? "—"} ms</td>
                    <td>{b.p95_ms ?? "—"} ms</td>
                  </tr>
                ))}
            </tbody>
          </table>
        </div>
      </details>
    </>
  );
}

function RoutesTable({ buckets }: { buckets: UsageBucket[] }) {
  const routes = useMemo(() => {
    const by = new Map<string, { count: number; errors: number; p95: number }>();
    for (const b of buckets) {
      const r = by.get(b.route ?? "?") ?? { count: 0, errors: 0, p95: 0 };
      r.count += b.count;
      r.errors += b.errors;
      r.p95 = Math.max(r.p95, b.p95_ms ?? 0);
      by.set(b.route ?? "?", r);
    }
    return [...by].sort((a, b) => b[1].count - a[1].count);
  }, [buckets]);
  if (routes.length === 0) return <Empty>No requests in this window yet.</Empty>;
  const most = routes[0][1].count;
  return (
    <div class="table-wrap">
      <table class="routes">
        <thead>
          <tr>
            <th scope="col">Route</th>
            <th scope="col">Requests</th>
            <th scope="col">Errors</th>
            <th scope="col">p95, worst day (ms)</th>
          </tr>
        </thead>
        <tbody>
          {routes.map(([route, r]) => (
            <tr key={route}>
              <td>
                <code>{route}</code>
                <div class="bar" aria-hidden="true">
                  <span style={{ width: `${(r.count / most) * 100}%` }} />
                  <span class="errors" style={{ width: `${(r.errors / most) * 100}%` }} />
                </div>
              </td>
              <td>{r.count}</td>
              <td>{r.errors}</td>
              <td>{r.p95 || "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
