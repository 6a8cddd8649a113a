import { useState } from "preact/hooks";
import { call, type Webhook, type WebhookWithSecret } from "../../api";
import { href } from "../../session";
import { ErrorNotice, Loaded, NeedsScope, Status, Time, useAccount, useAction, useApi, useSecretRotation } from "../../ui";
import { DeleteWebhook, EditWebhook } from "./edit";
import { HealthPanel } from "./health";
import { DeliveryLog } from "./log";
import { RecoverAndTest } from "./recover";

export function WebhookPage({ id }: { id: string }) {
  const { key, can } = useAccount();
  const hook = useApi<Webhook>(`/webhooks/${encodeURIComponent(id)}`);
  // Bumped when a test or a recovery adds deliveries: the log reads itself again.
  const [logVersion, setLogVersion] = useState(0);
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const toggle = useAction((next: "enabled" | "disabled") =>
    call<Webhook>(key, "PATCH", `/webhooks/${encodeURIComponent(id)}`, { status: next }),
  );
  const rotation = useSecretRotation({
    rotate: () => call<WebhookWithSecret>(key, "POST", `/webhooks/${encodeURIComponent(id)}/rotate-secret`),
    secretOf: (wh) => wh.secret,
    signs:
      "Deliveries are signed with the new secret and, for 24 hours, also with the old one, so your endpoint can switch without losing any.",
    action: "Rotate secret",
  });

  return (
    <section aria-labelledby="webhook-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={href("webhooks")}>Webhooks</a> / <span>{id}</span>
      </nav>
      <Loaded state={hook} what="the webhook">
        {(wh) => (
          <>
            <header class="page-head">
              <h2 id="webhook-title" class="break">
                {wh.url}
              </h2>
              <Status value={wh.status} />
            </header>
            <dl class="facts">
              <dt>ID</dt>
              <dd>
                <code>{wh.id}</code>
              </dd>
              <dt>Events</dt>
              <dd>
                {wh.events.map((t) => (
                  <code class="chip" key={t}>
                    {t}
                  </code>
                ))}
              </dd>
              {wh.description && (
                <>
                  <dt>Description</dt>
                  <dd>{wh.description}</dd>
                </>
              )}
              <dt>Created</dt>
              <dd>
                <Time at={wh.created_at} />
              </dd>
            </dl>
            {can("webhooks:write") ? (
              <div class="actions left">
                <button
                  type="button"
                  class="outline"
                  aria-busy={toggle.pending}
                  disabled={toggle.pending}
                  onClick={async () => (await toggle.go(wh.status === "enabled" ? "disabled" : "enabled")) && hook.reload()}
                >
                  {wh.status === "enabled" ? "Disable" : "Enable"}
                </button>
                <button type="button" class="outline secondary" onClick={rotation.begin}>
                  Rotate secret
                </button>
                <button type="button" class="outline secondary" onClick={() => setEditing(true)} disabled={editing}>
                  Edit
                </button>
                <button type="button" class="outline danger" onClick={() => setDeleting(true)}>
                  Delete
                </button>
              </div>
            ) : (
              <NeedsScope scope="webhooks:write" />
            )}
            <ErrorNotice error={toggle.error ?? rotation.error} />
            {editing && (
              <EditWebhook
                webhook={wh}
                onCancel={() => setEditing(false)}
                onSaved={() => {
                  setEditing(false);
                  hook.reload();
                }}
              />
            )}
            {deleting && <DeleteWebhook webhook={wh} onCancel={() => setDeleting(false)} />}
            <HealthPanel webhook={wh} />
            {can("webhooks:write") && wh.status === "enabled" && (
              <RecoverAndTest webhookId={id} events={wh.events} onStarted={() => setLogVersion((v) => v + 1)} />
            )}
          </>
        )}
      </Loaded>
      {rotation.dialogs}

      <DeliveryLog webhookId={id} version={logVersion} />
    </section>
  );
}
