const TONES: Record<string, string> = {
  active: "ok",
  enabled: "ok",
  succeeded: "ok",
  disabled: "off",
  inactive: "off",
  revoked: "bad",
  expired: "off",
  failed: "bad",
  cancelled: "off",
  pending: "wait",
  queued: "wait",
  running: "wait",
  waiting: "wait",
  skipped: "off",
  accepted: "ok",
  started: "ok",
  refused: "bad",
  missed: "bad",
  duplicate: "off",
  filtered: "off",
};

export function Status({ value }: { value: string }) {
  return <span class={`status ${TONES[value] ?? ""}`}>{value}</span>;
}

export function Time({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">—</span>;
  const date = new Date(at);
  return (
    <time dateTime={at} title={at}>
      {date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" })}
    </time>
  );
}

export function Json({ value, label }: { value: unknown; label: string }) {
  return (
    <pre class="json" aria-label={label} tabIndex={0}>
      <code>{JSON.stringify(value, null, 2)}</code>
    </pre>
  );
}
