import { useState } from "preact/hooks";
import { call, type Webhook } from "../../api";
import { href } from "../../session";
import { Confirm, ErrorNotice, FieldError, useAccount, useAction } from "../../ui";

const splitTypes = (text: string) =>
  text
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean);

/** Changes an endpoint's URL, event types, description and rate limit (PATCH: only what changed is sent). */
export function EditWebhook({ webhook: wh, onSaved, onCancel }: { webhook: Webhook; onSaved(): void; onCancel(): void }) {
  const { key } = useAccount();
  const [url, setUrl] = useState(wh.url);
  const [events, setEvents] = useState(wh.events.join(", "));
  const [description, setDescription] = useState(wh.description ?? "");
  const [rate, setRate] = useState(wh.rate_limit === null ? "" : String(wh.rate_limit));
  const save = useAction(() => {
    const body: Record<string, unknown> = {};
    if (url.trim() !== wh.url) body.url = url.trim();
    if (splitTypes(events).join(",") !== wh.events.join(",")) body.events = splitTypes(events);
    if (description.trim() !== (wh.description ?? "")) body.description = description.trim() === "" ? null : description.trim();
    const limit = rate.trim() === "" ? null : Number(rate);
    if (limit !== wh.rate_limit) body.rate_limit = limit;
    return call<Webhook>(key, "PATCH", `/webhooks/${encodeURIComponent(wh.id)}`, body);
  });
  return (
    <form
      class="panel"
      aria-labelledby="edit-webhook-title"
      onSubmit={async (e) => {
        e.preventDefault();
        if (await save.go()) onSaved();
      }}
    >
      <h3 id="edit-webhook-title">Edit endpoint</h3>
      <label>
        Endpoint URL
        <input
          type="url"
          name="url"
          required
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          aria-invalid={save.error?.param === "url" || undefined}
          aria-describedby="url-error"
        />
        <FieldError error={save.error} param="url" />
      </label>
      <label>
        Event types
        <input
          name="events"
          required
          value={events}
          onInput={(e) => setEvents(e.currentTarget.value)}
          aria-invalid={save.error?.param?.startsWith("events") || undefined}
          aria-describedby="events-error"
        />
        <FieldError error={save.error} param="events" />
      </label>
      <label>
        Description
        <input name="description" maxLength={500} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </label>
      <label>
        Rate limit (deliveries a second; empty: as fast as it answers)
        <input
          name="rate_limit"
          type="number"
          min={1}
          step={1}
          inputMode="numeric"
          value={rate}
          onInput={(e) => setRate(e.currentTarget.value)}
          aria-invalid={save.error?.param === "rate_limit" || undefined}
          aria-describedby="rate_limit-error"
        />
        <FieldError error={save.error} param="rate_limit" />
      </label>
      {save.error && !["url", "events", "rate_limit"].includes(save.error.param ?? "") && <ErrorNotice error={save.error} />}
      <div class="actions">
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" aria-busy={save.pending} disabled={save.pending}>
          Save changes
        </button>
      </div>
    </form>
  );
}

/** Deletes the endpoint after a confirmation, then goes back to the list. */
export function DeleteWebhook({ webhook: wh, onCancel }: { webhook: Webhook; onCancel(): void }) {
  const { key } = useAccount();
  const remove = useAction(() => call<Webhook>(key, "DELETE", `/webhooks/${encodeURIComponent(wh.id)}`));
  return (
    <Confirm
      title="Delete this endpoint?"
      body={
        <>
          <p class="break">
            <code>{wh.url}</code> stops receiving events at once, and its delivery log is deleted with it, pending deliveries included.
          </p>
          <ErrorNotice error={remove.error} />
        </>
      }
      action="Delete endpoint"
      tone="danger"
      pending={remove.pending}
      onCancel={onCancel}
      onConfirm={async () => {
        if (await remove.go()) location.hash = href("webhooks");
      }}
    />
  );
}
