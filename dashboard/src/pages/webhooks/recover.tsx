import { useState } from "preact/hooks";
import { call, type Recovery } from "../../api";
import { ErrorNotice, useAccount, useAction, useApi } from "../../ui";
import { TestSend } from "./test-send";

/**
 * Recovers the failed deliveries since a time, showing the job's progress, beside the test send
 * (test-send.tsx).
 */
export function RecoverAndTest({ webhookId, events, onStarted }: { webhookId: string; events: string[]; onStarted(): void }) {
  const { key } = useAccount();
  const base = `/webhooks/${encodeURIComponent(webhookId)}`;
  const [since, setSince] = useState(() => new Date(Date.now() - 24 * 3_600_000).toISOString().slice(0, 16));
  const [jobId, setJobId] = useState<string | null>(null);
  const recover = useAction(() => call<Recovery>(key, "POST", `${base}/recover`, { since: new Date(since).toISOString() }));
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
      <TestSend webhookId={webhookId} events={events} onSent={onStarted} />
      {job.data && (
        <p role="status" class="recovery" data-recovery={job.data.status}>
          Recovery {job.data.status === "running" ? "running" : "done"}: {job.data.done} of {job.data.total}
          {job.data.total_capped ? "+" : ""} redelivered <progress value={job.data.done} max={Math.max(job.data.total, 1)} />
        </p>
      )}
      <ErrorNotice error={recover.error} />
    </div>
  );
}
