import { useState } from "preact/hooks";
import { call, type Delivery, type Recovery } from "../../api";
import { ErrorNotice, useAccount, useAction, useApi } from "../../ui";

/**
 * Sends a test event of a type the webhook subscribes to (any type when it subscribes to `*`), and
 * recovers the failed deliveries since a time, showing the job's progress.
 */
export function RecoverAndTest({ webhookId, events, onStarted }: { webhookId: string; events: string[]; onStarted(): void }) {
  const { key } = useAccount();
  const base = `/webhooks/${encodeURIComponent(webhookId)}`;
  const [since, setSince] = useState(() => new Date(Date.now() - 24 * 3_600_000).toISOString().slice(0, 16));
  const [jobId, setJobId] = useState<string | null>(null);
  const recover = useAction(() => call<Recovery>(key, "POST", `${base}/recover`, { since: new Date(since).toISOString() }));
  const anyType = events.includes("*");
  const [testType, setTestType] = useState(anyType ? "webhook.test" : (events[0] ?? ""));
  const [sent, setSent] = useState<Delivery | null>(null);
  const test = useAction(() => call<Delivery>(key, "POST", `${base}/test`, { event_type: testType.trim() }));
  const job = useApi<Recovery>(jobId === null ? null : `${base}/recover/${encodeURIComponent(jobId)}`, undefined, 1000);
  return (
    <div class="recover">
      <form
        class="inline"
        onSubmit={async (e) => {
          e.preventDefault();
          const started = await recover.go();
          if (started) {
            setJobId(started.id);
            onStarted();
          }
        }}
      >
        <label>
          Recover failed deliveries since
          <input type="datetime-local" name="since" value={since} onInput={(e) => setSince(e.currentTarget.value)} required />
        </label>
        <button type="submit" class="outline small" aria-busy={recover.pending} disabled={recover.pending}>
          Recover
        </button>
      </form>
      <form
        class="inline"
        aria-label="Test event"
        onSubmit={async (e) => {
          e.preventDefault();
          const delivery = await test.go();
          setSent(delivery ?? null);
          if (delivery) onStarted();
        }}
      >
        <label>
          Test event of type
          {anyType ? (
            <input name="event_type" required value={testType} onInput={(e) => setTestType(e.currentTarget.value)} />
          ) : (
            <select name="event_type" value={testType} onChange={(e) => setTestType(e.currentTarget.value)}>
              {events.map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          )}
        </label>
        <button type="submit" class="outline secondary small" aria-busy={test.pending} disabled={test.pending}>
          Send test event
        </button>
      </form>
      {sent && (
        <p role="status" class="notice ok break">
          Test {sent.event_type} sent: delivery <code>{sent.id}</code>, {sent.status}
          {sent.attempts[0]?.status_code ? ` (HTTP ${sent.attempts[0].status_code})` : ""}. It is in the log below.
        </p>
      )}
      {job.data && (
        <p role="status" class="recovery" data-recovery={job.data.status}>
          Recovery {job.data.status === "running" ? "running" : "done"}: {job.data.done} of {job.data.total}
          {job.data.total_capped ? "+" : ""} redelivered <progress value={job.data.done} max={Math.max(job.data.total, 1)} />
        </p>
      )}
      <ErrorNotice error={recover.error ?? test.error} />
    </div>
  );
}
