import type { ComponentChildren } from "preact";
import { createContext } from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import { grants, type ScopeName } from "../../shared/api/scopes";
import { ApiFailure, call, pathWith, type Me, type PageMeta, type Query } from "./api";

/** What every page needs: the key of the chosen environment and what it is allowed to do. */
export interface Account {
  key: string;
  identity: Me;
  can(scope: ScopeName): boolean;
}
export const AccountContext = createContext<Account | null>(null);

export function useAccount(): Account {
  const account = useContext(AccountContext);
  if (!account) throw new Error("useAccount outside a signed-in page");
  return account;
}

export const accountOf = (key: string, identity: Me): Account => ({
  key,
  identity,
  can: (scope) => grants(identity.api_key.scopes, scope),
});

interface Loaded<T> {
  loading: boolean;
  error: ApiFailure | null;
  data: T | null;
  meta: PageMeta | null;
  reload(): void;
}

/**
 * GETs `path` with `query` and keeps the answer. `pollMs` refreshes it in the background (no loading
 * state, an error kept until the next success), which is how new deliveries and run steps appear.
 */
export function useApi<T>(path: string | null, query?: Query, pollMs?: number): Loaded<T> {
  const { key } = useAccount();
  const url = path === null ? null : pathWith(path, query);
  const [state, setState] = useState<{
    url: string | null;
    data: T | null;
    meta: PageMeta | null;
    error: ApiFailure | null;
    loading: boolean;
  }>({
    url: null,
    data: null,
    meta: null,
    error: null,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const background = useRef(false);

  useEffect(() => {
    if (url === null) return;
    let live = true;
    const quiet = background.current;
    background.current = false;
    if (!quiet) setState((s) => ({ ...s, url, loading: true, error: null, ...(s.url !== url && { data: null, meta: null }) }));
    call<any>(key, "GET", url).then(
      (answer) => {
        if (!live) return;
        const list = answer && typeof answer === "object" && "meta" in answer && Array.isArray(answer.data);
        setState({ url, loading: false, error: null, data: list ? answer.data : answer, meta: list ? answer.meta : null });
      },
      (err: ApiFailure) => live && setState((s) => ({ ...s, url, loading: false, error: err })),
    );
    return () => {
      live = false;
    };
  }, [key, url, tick]);

  useEffect(() => {
    if (!pollMs || url === null) return;
    const timer = setInterval(() => {
      if (document.hidden) return;
      background.current = true;
      setTick((t) => t + 1);
    }, pollMs);
    return () => clearInterval(timer);
  }, [pollMs, url]);

  return {
    loading: state.loading,
    error: state.error,
    data: state.url === url ? state.data : null,
    meta: state.url === url ? state.meta : null,
    reload,
  };
}

/** Runs one write, keeping its pending state and error for the form or button that started it. */
export function useAction<A extends unknown[], R>(run: (...args: A) => Promise<R>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiFailure | null>(null);
  const go = async (...args: A): Promise<R | undefined> => {
    setPending(true);
    setError(null);
    try {
      return await run(...args);
    } catch (err) {
      setError(err instanceof ApiFailure ? err : new ApiFailure(0, "client_error", (err as Error).message));
      return undefined;
    } finally {
      setPending(false);
    }
  };
  return { pending, error, go, clear: () => setError(null) };
}

export function Loading({ what }: { what: string }) {
  return (
    <p aria-busy="true" class="muted">
      Loading {what}…
    </p>
  );
}

export function ErrorNotice({ error, retry }: { error: ApiFailure | null; retry?: () => void }) {
  if (!error) return null;
  return (
    <div role="alert" class="notice error">
      <strong>{error.message}</strong>
      <small>
        {error.code}
        {error.status > 0 && ` · HTTP ${error.status}`}
        {error.requestId && ` · ${error.requestId}`}
      </small>
      {retry && (
        <button type="button" class="outline secondary small" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="notice empty">{children}</div>;
}

/** The three states of a loaded list or item, then the content. */
export function Loaded<T>({ state, what, children }: { state: Loaded<T>; what: string; children: (data: T) => ComponentChildren }) {
  if (state.error && state.data === null) return <ErrorNotice error={state.error} retry={state.reload} />;
  if (state.data === null) return <Loading what={what} />;
  return (
    <>
      {state.error && <ErrorNotice error={state.error} retry={state.reload} />}
      {children(state.data)}
    </>
  );
}

export interface Column<T> {
  title: string;
  /** Read by screen readers only (an actions column). */
  hideTitle?: boolean;
  class?: string;
  cell(row: T): ComponentChildren;
}

export function DataTable<T>({
  rows,
  columns,
  rowKey,
  caption,
}: {
  rows: T[];
  columns: Column<T>[];
  rowKey(row: T): string | number;
  caption?: string;
}) {
  return (
    <div class="table-wrap">
      <table>
        {caption && <caption class="visually-hidden">{caption}</caption>}
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col" key={c.title}>
                {c.hideTitle ? <span class="visually-hidden">{c.title}</span> : c.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((c) => (
                <td key={c.title} class={c.class}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A paged list endpoint's loading, error and empty states, its table, and its pager. */
export function ListOf<T extends { id: string }>({
  state,
  what,
  empty,
  columns,
  onPage,
}: {
  state: Loaded<T[]>;
  what: string;
  empty: ComponentChildren;
  columns: Column<T>[];
  onPage(page: number): void;
}) {
  return (
    <>
      <Loaded state={state} what={what}>
        {(rows) => (rows.length === 0 ? <Empty>{empty}</Empty> : <DataTable rows={rows} columns={columns} rowKey={(r) => r.id} />)}
      </Loaded>
      <Pager meta={state.meta} onPage={onPage} />
    </>
  );
}

/** A JSON text field: what was typed, and the parse error shown under it on submit. */
export function useJsonText(initial: string) {
  const [text, setText] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  return {
    text,
    setText,
    error,
    /** The parsed value, or undefined (and the error shown) when the text is not JSON. */
    parse(): unknown {
      try {
        const value: unknown = JSON.parse(text);
        setError(null);
        return value;
      } catch (err) {
        setError(`Not valid JSON: ${(err as Error).message}`);
        return undefined;
      }
    },
  };
}

export function JsonField({
  label,
  name,
  rows,
  json,
  invalid,
}: {
  label: string;
  name: string;
  rows: number;
  json: ReturnType<typeof useJsonText>;
  invalid?: boolean;
}) {
  return (
    <label>
      {label}
      <textarea
        name={name}
        rows={rows}
        class="mono"
        spellcheck={false}
        value={json.text}
        onInput={(e) => json.setText(e.currentTarget.value)}
        aria-invalid={json.error !== null || invalid || undefined}
        aria-describedby={`${name}-error`}
      />
      {json.error && <small id={`${name}-error`}>{json.error}</small>}
    </label>
  );
}

/** A labelled select of a list's filter (or a window): `options` maps each value to its label. */
export function Choice<V extends string>({
  label,
  name,
  value,
  options,
  onChange,
}: {
  label: string;
  name: string;
  value: V;
  options: Record<V, string>;
  onChange(value: V): void;
}) {
  return (
    <label>
      {label}
      <select name={name} value={value} onChange={(e) => onChange(e.currentTarget.value as V)}>
        {(Object.keys(options) as V[]).map((v) => (
          <option key={v} value={v}>
            {options[v]}
          </option>
        ))}
      </select>
    </label>
  );
}

/** Status filter options: "All", then each status as the API names it. */
export const statusOptions = <S extends string>(statuses: readonly S[]): Record<"all" | S, string> =>
  Object.fromEntries([["all", "All"], ...statuses.map((s) => [s, s])]) as Record<"all" | S, string>;

export function Pager({ meta, onPage }: { meta: PageMeta | null; onPage(page: number): void }) {
  if (!meta || meta.total <= meta.per_page) return null;
  const pages = Math.max(1, Math.ceil(meta.total / meta.per_page));
  return (
    <nav aria-label="Pages" class="pager">
      <button type="button" class="outline secondary small" disabled={meta.page <= 1} onClick={() => onPage(meta.page - 1)}>
        ← Newer
      </button>
      <span>
        Page {meta.page} of {pages}
        {meta.total_capped ? ` · the latest ${meta.total}` : ` · ${meta.total} in all`}
      </span>
      <button type="button" class="outline secondary small" disabled={meta.page >= pages} onClick={() => onPage(meta.page + 1)}>
        Older →
      </button>
    </nav>
  );
}

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

/** A secret the API shows once: visible, selectable, with a copy button and a plain warning. */
/**
 * A rotate-secret action (webhooks, workflows): `begin()` opens a confirmation saying what the
 * 24-hour overlap means for `signs` (its receivers), then the new secret is shown once; `error` is the
 * call's, and `dialogs` goes where the page shows them.
 */
export function useSecretRotation<R>(opts: {
  rotate(): Promise<R>;
  secretOf(answer: R): string | null | undefined;
  signs: string;
  action: string;
}) {
  const [rotating, setRotating] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const rotate = useAction(opts.rotate);
  const dialogs = (
    <>
      {secret && <SecretOnce label="New signing secret" value={secret} onDone={() => setSecret(null)} />}
      {rotating && (
        <Confirm
          title="Rotate the signing secret?"
          body={<p>{opts.signs}</p>}
          action={opts.action}
          pending={rotate.pending}
          onCancel={() => setRotating(false)}
          onConfirm={async () => {
            const answer = await rotate.go();
            setRotating(false);
            const next = answer === undefined ? undefined : opts.secretOf(answer);
            if (next) setSecret(next);
          }}
        />
      )}
    </>
  );
  return { begin: () => (setRotating(true), setSecret(null)), error: rotate.error, dialogs };
}

export function SecretOnce({ label, value, onDone }: { label: string; value: string; onDone(): void }) {
  const [copied, setCopied] = useState<"yes" | "no" | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied("yes");
    } catch {
      setCopied("no");
    }
  };
  return (
    <article class="secret" aria-labelledby="secret-title">
      <h3 id="secret-title">{label}</h3>
      <p>Copy it now: it is shown only this once and cannot be read again.</p>
      <div role="group" class="secret-row">
        <input readOnly aria-label={label} value={value} onFocus={(e) => (e.target as HTMLInputElement).select()} data-secret />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p role="status" class="muted">
        {copied === "yes"
          ? "Copied to the clipboard."
          : copied === "no"
            ? "The browser refused the clipboard: select the text and copy it."
            : ""}
      </p>
      <button type="button" class="secondary" onClick={onDone}>
        I have saved it
      </button>
    </article>
  );
}

/** A modal question (native <dialog>: focus stays inside, Escape cancels). */
export function Confirm({
  title,
  body,
  action,
  tone,
  onConfirm,
  onCancel,
  pending,
}: {
  title: string;
  body: ComponentChildren;
  action: string;
  tone?: "danger";
  pending?: boolean;
  onConfirm(): void;
  onCancel(): void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onCancel={(e) => (e.preventDefault(), onCancel())}>
      <article>
        <h3 id="confirm-title">{title}</h3>
        <div>{body}</div>
        <footer>
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
          <button type="button" class={tone === "danger" ? "danger" : ""} aria-busy={pending} disabled={pending} onClick={onConfirm}>
            {action}
          </button>
        </footer>
      </article>
    </dialog>
  );
}

/** Says what a key lacks instead of offering a button that can only fail. */
export function NeedsScope({ scope }: { scope: string }) {
  return (
    <p class="muted small">
      Your key cannot change this: it needs the <code>{scope}</code> scope.
    </p>
  );
}

export function FieldError({ error, param }: { error: ApiFailure | null; param: string }) {
  if (!error || error.param !== param) return null;
  return <small id={`${param}-error`}>{error.message}</small>;
}
