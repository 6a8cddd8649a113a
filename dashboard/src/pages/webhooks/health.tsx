import type { Delivery, Webhook } from "../../api";
import { Time, useApi } from "../../ui";

/** A share as people read it: 97.5 %. */
const percent = (rate: number) => `${Math.round(rate * 1000) / 10} %`;

/**
 * How the endpoint is doing: why it was disabled, its last attempt, failures in a row, the last 24
 * hours, and the last error an attempt met (from its newest deliveries: a bounded read).
 */
export function HealthPanel({ webhook: wh }: { webhook: Webhook }) {
  const recent = useApi<Delivery[]>(`/webhooks/${encodeURIComponent(wh.id)}/deliveries`, { limit: 10 });
  const h = wh.health;
  const failed = (recent.data ?? [])
    .flatMap((d) => d.attempts.map((a) => ({ delivery: d, attempt: a })))
    .filter(({ attempt }) => attempt.error !== null || attempt.status_code === null || attempt.status_code >= 300)
    .sort((x, y) => (x.attempt.at < y.attempt.at ? 1 : -1))[0];
  return (
    <section aria-labelledby="health-title" class="health">
      <h3 id="health-title">Health</h3>
      {wh.disabled_reason && (
        <p class="notice error" role="note">
          Why it is disabled: <span class="break">{wh.disabled_reason}</span>
        </p>
      )}
      <dl class="facts">
        <dt>Last attempt</dt>
        <dd>
          {h?.last_attempt ? (
            <>
              <Time at={h.last_attempt.at} /> · {h.last_attempt.status_code ?? "no answer"}
              {h.last_attempt.ok ? "" : " (failed)"}
            </>
          ) : (
            <span class="muted">none yet</span>
          )}
        </dd>
        <dt>Failed in a row</dt>
        <dd>{h?.consecutive_failed_attempts ?? wh.consecutive_failures}</dd>
        <dt>Last 24 hours</dt>
        <dd>
          {h && h.attempts_24h.total > 0
            ? `${h.attempts_24h.succeeded} of ${h.attempts_24h.total} attempts succeeded (${percent(h.success_rate_24h ?? 0)})`
            : "no attempts"}
        </dd>
        <dt>Last error</dt>
        <dd data-last-error>
          {failed ? (
            <>
              <span class="break">{failed.attempt.error ?? `HTTP ${failed.attempt.status_code}`}</span>{" "}
              <small class="muted">
                (<Time at={failed.attempt.at} />, {failed.delivery.event_type})
              </small>
            </>
          ) : (
            <span class="muted">none in the latest deliveries</span>
          )}
        </dd>
      </dl>
    </section>
  );
}
