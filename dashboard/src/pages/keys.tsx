import { useState } from "preact/hooks";
import { SCOPE_NAMES, SCOPES } from "../../../shared/api/scopes";
import { call, type ApiKey, type NewApiKey } from "../api";
import { Confirm, ErrorNotice, FieldError, ListOf, NeedsScope, SecretOnce, Status, Time, useAccount, useAction, useApi } from "../ui";

export function KeysPage() {
  const { key, identity, can } = useAccount();
  const [page, setPage] = useState(1);
  const list = useApi<ApiKey[]>("/api-keys", { page, per_page: 20 });
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<NewApiKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const revoke = useAction((id: string) => call<ApiKey>(key, "DELETE", `/api-keys/${encodeURIComponent(id)}`));

  return (
    <section aria-labelledby="keys-title">
      <header class="page-head">
        <h2 id="keys-title">API keys</h2>
        {can("api-keys:write") && !creating && (
          <button type="button" onClick={() => (setCreating(true), setSecret(null))}>
            Create key
          </button>
        )}
      </header>
      {!can("api-keys:write") && <NeedsScope scope="api-keys:write" />}
      {creating && (
        <CreateKey
          onCancel={() => setCreating(false)}
          onCreated={(created) => {
            setCreating(false);
            setSecret(created);
            setPage(1);
            list.reload();
          }}
        />
      )}
      {secret?.key && <SecretOnce label={`Secret of “${secret.name}”`} value={secret.key} onDone={() => setSecret(null)} />}
      <ErrorNotice error={revoke.error} />
      <ListOf
        state={list}
        what="API keys"
        empty={`No keys yet in ${identity.environment}.`}
        onPage={setPage}
        columns={[
          {
            title: "Name",
            cell: (k) => (
              <>
                {k.name}
                {k.id === identity.api_key.id && <small class="muted"> (this session)</small>}
              </>
            ),
          },
          {
            title: "Key",
            class: "nowrap",
            cell: (k) => (
              <code>
                {k.prefix}…{k.last4}
              </code>
            ),
          },
          {
            title: "Scopes",
            cell: (k) =>
              k.scopes.map((sc) => (
                <code class="chip" key={sc}>
                  {sc}
                </code>
              )),
          },
          { title: "Status", cell: (k) => <Status value={k.status} /> },
          { title: "Created", cell: (k) => <Time at={k.created_at} /> },
          { title: "Last used", cell: (k) => <Time at={k.last_used_at} /> },
          {
            title: "Actions",
            hideTitle: true,
            cell: (k) =>
              can("api-keys:write") &&
              k.status === "active" && (
                <button type="button" class="outline danger small" onClick={() => setRevoking(k)} aria-label={`Revoke ${k.name}`}>
                  Revoke
                </button>
              ),
          },
        ]}
      />
      {revoking && (
        <Confirm
          title={`Revoke “${revoking.name}”?`}
          body={
            <p>
              Requests with{" "}
              <code>
                {revoking.prefix}…{revoking.last4}
              </code>{" "}
              are refused at once, on every gateway.
              {revoking.id === identity.api_key.id && " This is the key you are signed in with: this session ends."} This cannot be undone.
            </p>
          }
          action="Revoke key"
          tone="danger"
          pending={revoke.pending}
          onCancel={() => setRevoking(null)}
          onConfirm={async () => {
            const done = await revoke.go(revoking.id);
            setRevoking(null);
            if (done) list.reload();
          }}
        />
      )}
    </section>
  );
}

function CreateKey({ onCreated, onCancel }: { onCreated(key: NewApiKey): void; onCancel(): void }) {
  const { key, identity, can } = useAccount();
  const [name, setName] = useState("");
  const [scopes, setScopes] = useState<string[]>([]);
  const [expires, setExpires] = useState("");
  const create = useAction(() =>
    call<NewApiKey>(key, "POST", "/api-keys", {
      name: name.trim(),
      scopes,
      ...(expires && { expires_at: new Date(expires).toISOString() }),
    }),
  );
  // A key can grant only scopes it holds (org:admin grants any).
  const grantable = SCOPE_NAMES.filter((s) => can(s));
  return (
    <form
      class="panel"
      aria-labelledby="create-key-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const created = await create.go();
        if (created) onCreated(created);
      }}
    >
      <h3 id="create-key-title">New {identity.environment} key</h3>
      <label>
        Name
        <input
          name="name"
          required
          maxLength={100}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
          aria-invalid={create.error?.param === "name" || undefined}
          aria-describedby="name-error"
        />
        <FieldError error={create.error} param="name" />
      </label>
      <fieldset>
        <legend>Scopes</legend>
        <div class="checks">
          {grantable.map((s) => (
            <label key={s}>
              <input
                type="checkbox"
                name="scopes"
                value={s}
                checked={scopes.includes(s)}
                onChange={(e) => setScopes(e.currentTarget.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
              />
              <code>{s}</code> <small class="muted">{SCOPES[s]}</small>
            </label>
          ))}
        </div>
        <FieldError error={create.error} param="scopes" />
      </fieldset>
      <label>
        Expires (optional)
        <input type="datetime-local" name="expires_at" value={expires} onInput={(e) => setExpires(e.currentTarget.value)} />
        <FieldError error={create.error} param="expires_at" />
      </label>
      {create.error && !["name", "scopes", "expires_at"].includes(create.error.param ?? "") && <ErrorNotice error={create.error} />}
      <div class="actions">
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" aria-busy={create.pending} disabled={create.pending || scopes.length === 0}>
          Create key
        </button>
      </div>
    </form>
  );
}
