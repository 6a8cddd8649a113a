import { useEffect, useState } from "preact/hooks";
import { EVENT_EXAMPLES } from "../../../../shared/records/event-examples";
import { call, type Delivery, type PlatformEvent } from "../../api";
import { ErrorNotice, JsonField, useAccount, useAction, useApi, useJsonText } from "../../ui";

/**
 * Sends a test event of a type the webhook subscribes to (any type when it subscribes to `*`), with
 * a payload to edit. The payload starts as what the platform would send by itself: a system type's
 * example, else the data of the newest stored event of the type, else `{}`. Text that is not a JSON
 * object is refused under the field, before any request.
 */
export function TestSend({ webhookId, events, onSent }: { webhookId: string; events: string[]; onSent(): void }) {
  const { key } = useAccount();
  const anyType = events.includes("*");
  const [testType, setTestType] = useState(anyType ? "webhook.test" : (events[0] ?? ""));
  const type = testType.trim();
  const builtIn = EVENT_EXAMPLES[type];
  const latest = useApi<PlatformEvent[]>(builtIn ? null : "/events", { type, per_page: 1 });
  const example = builtIn ?? (latest.loading ? null : (latest.data?.[0]?.data ?? {}));
  const exampleText = example === null ? null : JSON.stringify(example, null, 2);
  const payload = useJsonText("");
  // A new type (or its example, once read) replaces the payload; edits stay until then.
  useEffect(() => {
    if (exampleText !== null) payload.setText(exampleText);
  }, [type, exampleText]);
  const [sent, setSent] = useState<Delivery | null>(null);
  const test = useAction((data: Record<string, unknown>) =>
    call<Delivery>(key, "POST", `/webhooks/${encodeURIComponent(webhookId)}/test`, { event_type: type, data }),
  );
  return (
    <>
      <form
        class="inline"
        aria-label="Test event"
        onSubmit={async (e) => {
          e.preventDefault();
          const data = payload.parseObject();
          if (!data) return;
          const delivery = await test.go(data);
          setSent(delivery ?? null);
          if (delivery) onSent();
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
        <div class="payload">
          <JsonField label="Payload data" name="test_data" rows={6} json={payload} invalid={test.error?.param?.startsWith("data")} />
        </div>
        <button type="submit" class="outline secondary small" aria-busy={test.pending} disabled={test.pending || exampleText === null}>
          Send test event
        </button>
      </form>
      {sent && (
        <p role="status" class="notice ok break">
          Test {sent.event_type} sent: delivery <code>{sent.id}</code>, {sent.status}
          {sent.attempts[0]?.status_code ? ` (HTTP ${sent.attempts[0].status_code})` : ""}. It is in the log below.
        </p>
      )}
      <ErrorNotice error={test.error} />
    </>
  );
}
